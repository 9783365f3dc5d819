package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/discover"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/sources"
	"github.com/reclaimer/reclaimer/internal/views"
)

// DiscoverOptions say where a zero-configuration discovery looks.
type DiscoverOptions struct {
	// Discover are the places (homes, worktree roots, persistence
	// folders); its Docker client, when nil, is made here unless NoDocker.
	Discover discover.Options
	// NoDocker: do not ask the Docker Engine (tests of folders alone).
	NoDocker bool
	// DockerHost is the Engine asked; default $DOCKER_HOST or the
	// platform's socket.
	DockerHost string
}

// Discovered is what a discovery found: the view, and the configuration
// of the sources it manages (nil when there is none).
type Discovered struct {
	View   views.Discovery
	Config *config.Config
}

// Found tells whether anything was found that the configuration manages.
func (d *Discovered) Found() bool { return d.Config != nil && len(d.Config.Sources) > 0 }

// Discover finds what coding agents left on this machine (package
// discover) and turns it into a configuration: one source table per set
// found, written and parsed exactly as a file (so init's file and the dry
// run over the discovery are the same sources with the same names). It
// never acts and writes nothing. A table that would make the
// configuration invalid (a folder two sets claim) is left out, commented,
// with the reason; so is a repository's table whose worktrees other
// sources manage already (one worktree belongs to one source).
func Discover(ctx context.Context, opts DiscoverOptions) (*Discovered, error) {
	dopts := opts.Discover
	var dockerPlace *discover.Place
	if dopts.Docker == nil && !opts.NoDocker {
		c, err := dockerclient.New(opts.DockerHost)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err = c.Ping(pctx)
			cancel()
		}
		if err == nil {
			dopts.Docker = c
			defer c.Close()
		} else {
			dockerPlace = &discover.Place{Path: "docker", For: "OpenHands containers", Result: "no Docker Engine answered: " + err.Error()}
		}
	}
	rep, err := discover.Discover(ctx, dopts)
	if err != nil {
		return nil, err
	}
	if dockerPlace != nil {
		rep.Places = append(rep.Places, *dockerPlace)
	}
	d := &Discovered{View: views.Discovery{Sources: []views.DiscoveredSource{}, Looked: rep.Places}}
	if d.View.Looked == nil {
		d.View.Looked = []discover.Place{}
	}
	var managed []string // the tables accepted so far, as TOML
	var text strings.Builder
	text.WriteString(configHeader)
	for _, s := range rep.Sources {
		v := views.DiscoveredSource{Agent: s.Agent, Kind: s.Kind, Looked: s.Looked, Found: s.Found, Notes: s.Notes}
		if v.Found == nil {
			v.Found = []discover.Found{}
		}
		table, err := tableTOML(s.Config, s.Kind == discover.KindOpenHands && dopts.Docker == nil)
		switch {
		case s.Config.Name == "":
			v.Unmanaged = "no configuration table can select these"
		case err != nil:
			v.Unmanaged = err.Error()
		case s.Kind == discover.KindRepository:
			v.Table = table
			v.Unmanaged = "it would also manage the worktrees the sources above manage (a worktree belongs to one source): uncomment it instead of them to manage every worktree of the repository"
		default:
			v.Table = table
			cfg, err := sources.Parse([]byte(configHeader+strings.Join(append(managed[:len(managed):len(managed)], table), "\n")), "discovered configuration")
			if err == nil {
				err = cfg.ResolvePaths()
			}
			if err != nil {
				v.Unmanaged = "it does not fit with the sources above: " + err.Error()
				break
			}
			managed = append(managed, table)
			v.Source = cfg.Sources[len(cfg.Sources)-1].Name()
		}
		text.WriteString("\n" + sourceComment(s, v))
		if v.Table != "" {
			if v.Unmanaged != "" {
				text.WriteString(commentOut(v.Table))
			} else {
				text.WriteString(v.Table)
			}
		}
		d.View.Sources = append(d.View.Sources, v)
	}
	if len(rep.Sources) == 0 {
		text.WriteString("\n# Nothing was found. Looked for:\n")
		for _, p := range rep.Places {
			text.WriteString(comment(fmt.Sprintf("%s in %s: %s", p.For, p.Path, p.Result)))
		}
	}
	d.View.Config = text.String()
	if len(managed) > 0 {
		cfg, err := sources.Parse([]byte(d.View.Config), "discovered configuration")
		if err != nil {
			return nil, fmt.Errorf("discover: the configuration of what was found does not parse: %w", err)
		}
		d.Config = cfg
	}
	return d, nil
}

// OpenDiscovered opens an App over a discovery's configuration for a dry
// run (plan, ls, status): its ledger and state are a temporary folder,
// removed when the App closes, so discovery writes nothing of its own
// anywhere (no state folder is needed or made) and no recovery runs.
func OpenDiscovered(ctx context.Context, d *Discovered, opts Options) (*App, error) {
	if !d.Found() {
		return nil, errors.New("open: nothing was discovered")
	}
	dir, err := os.MkdirTemp("", "reclaimer-discovery-")
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	cfg := *d.Config
	cfg.Ledger.Path = filepath.Join(dir, "ledger.db")
	cfg.Archive.Dir = filepath.Join(dir, "archives")
	cfg.Archive.S3 = nil
	if err := cfg.ResolvePaths(); err != nil {
		os.RemoveAll(dir)
		return nil, &InputError{Msg: err.Error()}
	}
	opts.Config, opts.Store, opts.Recover = &cfg, nil, false
	a, err := Open(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a.cleanup = func() error { return os.RemoveAll(dir) }
	return a, nil
}

const configHeader = `# reclaimer configuration, written by "reclaimer init" from what it found
# on this machine. Review it, then:
#   reclaimer --config FILE plan     the dry run over these sources
#   reclaimer --config FILE apply    one pass, for real
# Every key is documented in docs/configuration.md; docs/example.toml has
# them all.

[policy]
# The built-in defaults, spelled out. Any of these keys may also be set in
# a source table below, for that source only.

# Folders of a runtime's home emptied while the runtime is stopped.
cache_dirs = [".cache", ".npm"]
# Disk budget: above disk_high, dependencies of stopped runtimes are shed
# until usage is under disk_low (default disk_high - 0.05). "85%" to set.
disk_high = "off"
# Archive (when it holds unsaved work, verified) and delete runtimes idle
# this long, e.g. "14d". OpenHands conversations get the archive marker
# the agent-server honours, and "reclaimer restore" brings them back.
retention = "off"
# Notice period before anything is archived or deleted.
grace = "24h"
# Suspend (stop) runtimes idle this long, e.g. "20m": containers only.
idle_suspend = "off"
# Suspend runtimes this long after they were created, whatever they do.
max_lifetime = "off"
# Sweep runtimes no host registered through the API. Orphans a backend
# reports itself (an OpenHands runtime folder without its manifest, ...)
# are swept after grace in any case.
registered_only = false
`

// sourceComment is the comment above a source's table: what it is, what
// was found, where, and the notes.
func sourceComment(s discover.Source, v views.DiscoveredSource) string {
	var b strings.Builder
	agent := s.Agent
	if agent == "" {
		agent = "other worktrees of a repository"
	}
	b.WriteString(comment(fmt.Sprintf("%s (%s): %d found in %s.", agent, s.Kind, len(s.Found), strings.Join(s.Looked, ", "))))
	for _, f := range s.Found {
		line := "  " + f.String()
		b.WriteString(comment(line))
	}
	for _, n := range s.Notes {
		b.WriteString(comment("Note: " + n))
	}
	if v.Unmanaged != "" {
		b.WriteString(comment("Not managed: " + v.Unmanaged))
	}
	return b.String()
}

// comment makes text TOML comment lines (control characters dropped: a
// folder's name cannot end the comment and start a key).
func comment(text string) string {
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, text)
	return "# " + text + "\n"
}

func commentOut(table string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		b.WriteString("# " + line + "\n")
	}
	return b.String()
}

// tableTOML writes a discovered table. noDocker marks an [[openhands]]
// table found with no Engine answering: local mode.
func tableTOML(t discover.Table, noDocker bool) (string, error) {
	if t.Name == "" {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("[[" + t.Name + "]]\n")
	for _, k := range t.Keys {
		v, err := tomlValue(k.Value)
		if err != nil {
			return "", fmt.Errorf("%s: %w", k.Name, err)
		}
		b.WriteString(k.Name + " = " + v + "\n")
	}
	if noDocker {
		b.WriteString("docker = false  # no Docker Engine answered: local mode; true if the agent-server runs containers\n")
	}
	return b.String(), nil
}

func tomlValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return tomlString(v)
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			q, err := tomlString(s)
			if err != nil {
				return "", err
			}
			parts[i] = q
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case map[string]string:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			kq, err := tomlString(k)
			if err != nil {
				return "", err
			}
			vq, err := tomlString(v[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, kq+" = "+vq)
		}
		return "{ " + strings.Join(parts, ", ") + " }", nil
	}
	return "", fmt.Errorf("cannot write %T", v)
}

// tomlString is a TOML basic string; a value with control characters or
// invalid UTF-8 (a hostile folder name) is refused, not escaped.
func tomlString(s string) (string, error) {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%q holds control characters or invalid UTF-8: not written", s)
	}
	q := strconv.Quote(s)
	return q, nil
}
