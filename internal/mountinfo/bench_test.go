package mountinfo

import (
	"os"
	"testing"
)

// BenchmarkBelow is what the trash pays, under a runtime's lock, before
// each rename: one read and parse of this process's mount table.
func BenchmarkBelow(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := Below(dir); err != nil {
			b.Fatal(err)
		}
	}
	data, _ := os.ReadFile("/proc/self/mountinfo")
	b.ReportMetric(float64(len(Parse(data))), "mounts")
}
