package dockerclient

import "testing"

// TestEveryMountKindCountsBindDevice: which volume options bind a host
// folder (and so make it used like a bind mount).
func TestEveryMountKindCountsBindDevice(t *testing.T) {
	for _, tc := range []struct {
		driver string
		opts   map[string]string
		want   string
	}{
		{"local", map[string]string{"type": "none", "o": "bind", "device": "/srv/runs/a"}, "/srv/runs/a"},
		{"local", map[string]string{"type": "none", "o": "rw,rbind", "device": "/srv/runs/a/"}, "/srv/runs/a"},
		{"local", map[string]string{"type": "nfs", "o": "addr=10.0.0.1", "device": ":/export"}, ""},
		{"local", map[string]string{"type": "tmpfs", "device": "tmpfs"}, ""},
		{"local", nil, ""},
		{"other", map[string]string{"o": "bind", "device": "/srv/runs/a"}, ""},
	} {
		got, ok := BindDevice(tc.driver, tc.opts)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("BindDevice(%s, %v) = %q %v, want %q", tc.driver, tc.opts, got, ok, tc.want)
		}
	}
}
