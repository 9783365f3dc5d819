package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/cli"
)

// run runs the CLI in-process and returns its output and exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Version: "test"})
	return out.String(), errb.String(), code
}

// runOK runs the CLI and fails the test on a non-zero exit.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("reclaimer %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func runJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := runOK(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("reclaimer %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// config writes a configuration file whose ledger and archives live in
// dir, with body appended.
func config(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "reclaimer.toml")
	head := "[ledger]\npath = \"" + filepath.Join(dir, "state", "ledger.db") + "\"\n[archive]\ndir = \"" +
		filepath.Join(dir, "archives") + "\"\n"
	write(t, path, head+body)
	return path
}

type planJSON struct {
	PlanID    string `json:"plan_id"`
	CreatedAt string `json:"created_at"`
	Usage     []struct {
		Path     string  `json:"path"`
		Fraction float64 `json:"fraction"`
		High     float64 `json:"high"`
		Low      float64 `json:"low"`
	} `json:"usage"`
	Actions []struct {
		Runtime string   `json:"runtime"`
		Backend string   `json:"backend"`
		Step    string   `json:"step"`
		Paths   []string `json:"paths"`
		Bytes   int64    `json:"bytes"`
		Reason  string   `json:"reason"`
	} `json:"actions"`
	Skipped []struct {
		Runtime string `json:"runtime"`
		Reason  string `json:"reason"`
	} `json:"skipped"`
	Scheduled []struct {
		Runtime string `json:"runtime"`
		Step    string `json:"step"`
	} `json:"scheduled"`
}

type applyJSON struct {
	PlanID  string `json:"plan_id"`
	Results []struct {
		Runtime    string `json:"runtime"`
		Step       string `json:"step"`
		Outcome    string `json:"outcome"`
		Reason     string `json:"reason"`
		FreedBytes int64  `json:"freed_bytes"`
	} `json:"results"`
	FreedBytes int64 `json:"freed_bytes"`
}

func (p planJSON) steps(runtime string) []string {
	var s []string
	for _, a := range p.Actions {
		if a.Runtime == runtime {
			s = append(s, a.Step)
		}
	}
	return s
}

func (p planJSON) skipReason(runtime string) string {
	for _, s := range p.Skipped {
		if s.Runtime == runtime {
			return s.Reason
		}
	}
	return ""
}

var (
	git = func(t *testing.T, dir string, args ...string) string {
		return strings.TrimSpace(testtree.Git(t, dir, args...))
	}
	write   = testtree.Write
	newRepo = testtree.NewRepo
	age     = testtree.Age
)
