package config

import "testing"

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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := loadDoc(t, tt.doc)
			checkProblems(t, err, path, tt.want...)
		})
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
