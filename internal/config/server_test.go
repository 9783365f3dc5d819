package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServerAndNotifyChecks(t *testing.T) {
	testEnv(t)
	tests := []struct {
		name string
		doc  string
		want []problem
	}{
		{"defaults", "[server]\n", nil},
		{"unix socket", "[server]\nlisten = \"unix:/run/reclaimer.sock\"\n", nil},
		{"relative socket", "[server]\nlisten = \"unix:run.sock\"\n",
			[]problem{{2, "server.listen", `"unix:run.sock": a Unix socket path must be absolute`}}},
		{"no port", "[server]\nlisten = \"localhost\"\n",
			[]problem{{2, "server.listen", `"localhost": want "host:port" or "unix:/path"`}}},
		{"zero interval", "[server]\ninterval = \"0s\"\n",
			[]problem{{2, "server.interval", "must be positive"}}},
		{"relative token file", "[server]\ntoken_file = \"token\"\n",
			[]problem{{2, "server.token_file", `"token" is not an absolute path`}}},
		{"log format", "[server]\nlog_format = \"xml\"\n",
			[]problem{{2, "server.log_format", `"xml": want "text" or "json"`}}},
		{"notify without url", "[[notify]]\nevents = [\"failed\"]\n",
			[]problem{{1, "notify[0]", "url is required"}}},
		{"notify bad url and event", "[[notify]]\nurl = \"ftp://x\"\nevents = [\"exploded\"]\n",
			[]problem{{2, "notify[0].url", `"ftp://x": want an http:// or https:// URL`},
				{3, "notify[0].events[0]", `unknown event "exploded" (scheduled, reclaimed, archived, failed)`}}},
		// Rule "no credential in a webhook URL", and "no configuration
		// message quotes a credential" (a malformed URL included).
		{"notify userinfo", "[[notify]]\nurl = \"https://hook:hunter2@example.com/x\"\n",
			[]problem{{2, "notify[0].url", `"https://[redacted]@example.com/x": must not hold a user or password; send a credential with header and header_file`}}},
		{"notify malformed with userinfo", "[[notify]]\nurl = \"https://hook:hunter2@[::1/x\"\n",
			[]problem{{2, "notify[0].url", `"https://[redacted]@[::1/x": want an http:// or https:// URL`}}},
		{"notify secret twice", "[[notify]]\nurl = \"https://example.com\"\nsecret = \"a\"\nsecret_file = \"/run/s\"\n",
			[]problem{{4, "notify[0].secret_file", "set secret or secret_file, not both"}}},
		{"notify header without file", "[[notify]]\nurl = \"https://example.com\"\nheader = \"Authorization\"\n",
			[]problem{{3, "notify[0].header", "header and header_file go together"}}},
		{"notify own header", "[[notify]]\nurl = \"https://example.com\"\nheader = \"x-reclaimer-delivery\"\nheader_file = \"/run/h\"\n",
			[]problem{{3, "notify[0].header", `"x-reclaimer-delivery" is set by reclaimer itself`}}},
		{"notify header file relative", "[[notify]]\nurl = \"https://example.com\"\nheader = \"Authorization\"\nheader_file = \"h\"\n",
			[]problem{{4, "notify[0].header_file", `"h" is not an absolute path`}}},
		{"s3 endpoint userinfo", "[archive.s3]\nendpoint = \"https://AKIA:hunter2@s3.example.com\"\nbucket = \"b\"\n",
			[]problem{{2, "archive.s3.endpoint", `"https://[redacted]@s3.example.com": must not hold a user or password`}}},
		{"notify header", "[[notify]]\nurl = \"https://example.com\"\nheader = \"Authorization\"\nheader_file = \"/run/h\"\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := loadDoc(t, tt.doc)
			checkProblems(t, err, path, tt.want...)
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the message quotes the password: %v", err)
			}
		})
	}
}

// TestSyntaxErrorsRedactCredentials: a TOML error quoting a line that
// holds a URL with a password shows it redacted.
func TestSyntaxErrorsRedactCredentials(t *testing.T) {
	testEnv(t)
	_, _, err := loadDoc(t, "[[notify]]\nurl = \"https://hook:hunter2@example.com\" junk\n")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
	for in, want := range map[string]string{
		"see http://u:p@h/x and ftp://a@b":  "see http://[redacted]@h/x and ftp://[redacted]@b",
		`"https://u:p\"q@[::1"`:             `"https://[redacted]@[::1"`,
		"no url here, mail me@example.com":  "no url here, mail me@example.com",
		"https://example.com/a@b is a path": "https://example.com/a@b is a path",
	} {
		if got := RedactCredentials(in); got != want {
			t.Errorf("RedactCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNotifySecretsFromFiles: secret_file and header_file are read (first
// line); a missing file is an error naming the file, never a value.
func TestNotifySecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	sf, hf := filepath.Join(dir, "s"), filepath.Join(dir, "h")
	os.WriteFile(sf, []byte("sign-key\nignored\n"), 0o600)
	os.WriteFile(hf, []byte(" Bearer abc \n"), 0o600)
	s, h, err := Notify{URL: "https://x", SecretFile: sf, Header: "Authorization", HeaderFile: hf}.Secrets()
	if err != nil || s != "sign-key" || h != "Bearer abc" {
		t.Fatalf("%q %q %v", s, h, err)
	}
	if _, _, err := (Notify{URL: "https://x", HeaderFile: filepath.Join(dir, "none")}).Secrets(); err == nil || !strings.Contains(err.Error(), "header_file") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestListenIsLocal(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:7390": true, "[::1]:7390": true, "localhost:80": true, "unix:/run/r.sock": true,
		"0.0.0.0:7390": false, ":7390": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		if got := ListenIsLocal(listen); got != want {
			t.Errorf("ListenIsLocal(%q) = %v, want %v", listen, got, want)
		}
	}
}
