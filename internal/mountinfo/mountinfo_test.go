package mountinfo

import (
	"slices"
	"testing"
)

// TestFolderHoldingAMountIsNotRenamedWholePoints: the mount points strictly
// below a folder, escapes undone; the folder itself and look-alike
// siblings are not below it.
func TestFolderHoldingAMountIsNotRenamedWholePoints(t *testing.T) {
	ms := Parse([]byte(`22 1 8:1 / / rw - ext4 /dev/sda1 rw
30 22 8:1 /src /srv/runs/a/ws/mnt rw - ext4 /dev/sda1 rw
31 22 0:40 / /srv/runs/a/with\040space rw - tmpfs tmpfs rw
32 22 0:41 / /srv/runs/ab rw - tmpfs tmpfs rw
33 22 0:42 / /srv/runs/a rw - tmpfs tmpfs rw
`))
	got := PointsBelow(ms, "/srv/runs/a")
	if want := []string{"/srv/runs/a/ws/mnt", "/srv/runs/a/with space"}; !slices.Equal(got, want) {
		t.Fatalf("PointsBelow = %q, want %q", got, want)
	}
	if got := PointsBelow(ms, "/srv/runs/b"); len(got) != 0 {
		t.Fatalf("PointsBelow(b) = %q", got)
	}
}
