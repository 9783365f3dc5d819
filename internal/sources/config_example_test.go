package sources_test

import (
	"errors"
	"fmt"

	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/sources"
)

func ExampleParse() {
	c, err := sources.Parse([]byte(`
[ledger]
path = "/var/lib/reclaimer/ledger.db"
[archive]
dir = "/var/lib/reclaimer/archives"

[policy]
disk_high = "85%"
retention = "14d"

[[dirs]]
root = "/srv/agents/runs"
retention = "3d"
`), "reclaimer.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := c.PolicyFor(c.Sources[0].Table)
	fmt.Println(p.DiskHigh, p.DiskLow, p.Retention, p.Grace, p.CacheDirs)
	// Output: 0.85 0.8 72h0m0s 24h0m0s [.cache .npm]
}

func ExampleParse_errors() {
	_, err := sources.Parse([]byte(`
[ledger]
path = "/var/lib/reclaimer/ledger.db"

[policy]
dsik_high = 0.85
retention = "-1d"
`), "reclaimer.toml")
	fmt.Println(err)
	fmt.Println(errors.Is(err, config.ErrInvalid))
	// Output:
	// config reclaimer.toml:6: unknown key "dsik_high" in [policy]; did you mean "disk_high"?
	// config reclaimer.toml:7: policy.retention: "-1d": negative durations are not allowed
	// true
}
