package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"off", 0},
		{"0s", 0},
		{"0d", 0},
		{"30s", 30 * time.Second},
		{"90m", 90 * time.Minute},
		{"24h", 24 * time.Hour},
		{"14d", 14 * 24 * time.Hour},
		{"2w", 14 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1w2d3h4m5s", (9*24+3)*time.Hour + 4*time.Minute + 5*time.Second},
		{"1.5h", 90 * time.Minute},
		{"0.5d", 12 * time.Hour},
		{".5s", 500 * time.Millisecond},
		{"1.s", time.Second},
		{"500ms", 500 * time.Millisecond},
		{"1us", time.Microsecond},
		{"1µs", time.Microsecond},
		{"7ns", 7},
		{"1.000000247s", time.Second + 247},
		{"0.123456789123456789123s", 123456789},
		{"1.5w", days(10) + 12*time.Hour},
		{"1h1h", 2 * time.Hour},
		{"2562047h", 2562047 * time.Hour},
		{"106751d", 106751 * 24 * time.Hour},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || time.Duration(got) != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, time.Duration(got), err, tt.want)
		}
		var d Duration
		if err := d.UnmarshalText([]byte(tt.in)); err != nil || time.Duration(d) != tt.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tt.in, time.Duration(d), err, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", `empty duration: write "off" or leave the key out`},
		{"-1h", `"-1h": negative durations are not allowed`},
		{"-0s", `"-0s": negative durations are not allowed`},
		{"+1h", `"+1h": write the duration without a sign`},
		{"14", `"14": the number has no unit: write e.g. "14d", "14h" or "14m"`},
		{"1d12", `"1d12": the number has no unit: write e.g. "12d", "12h" or "12m"`},
		{"00", `"00": the number has no unit`},
		{"3x", `"3x": unknown unit "x" (use w, d, h, m, s, ms, us or ns)`},
		{"1 d", `"1 d": unknown unit " d"`},
		{"1d 2h", `"1d 2h": unknown unit "d "`},
		{"1y", `unknown unit "y"`},
		{"1D", `unknown unit "D"`},
		{"h", `"h" is not a duration: write a number and a unit`},
		{".h", `".h" is not a duration`},
		{"off ", `"off " is not a duration`},
		{"OFF", `"OFF" is not a duration`},
		{"true", `"true" is not a duration`},
		{"106752d", `"106752d": too long`},
		{"2562048h", `"2562048h": too long`},
		{"99999999999999999999s", `too long`},
		{"106751d1d", `"106751d1d": too long`},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want error containing %q", tt.in, time.Duration(got), err, tt.want)
		}
		d := Duration(time.Hour)
		if err := d.UnmarshalText([]byte(tt.in)); err == nil || d != Duration(time.Hour) {
			t.Errorf("UnmarshalText(%q) = %v and set %v; want an error and no change", tt.in, err, d)
		}
	}
}

func TestDurationString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{30 * time.Second, "30s"},
		{90 * time.Minute, "1h30m"},
		{24 * time.Hour, "1d"},
		{14 * 24 * time.Hour, "14d"},
		{36 * time.Hour, "1d12h"},
		{36*time.Hour + time.Minute + 1500*time.Millisecond, "1d12h1m1.5s"},
		{500 * time.Millisecond, "500ms"},
		{-time.Hour, "-1h0m0s"},
	}
	for _, tt := range tests {
		d := Duration(tt.in)
		if got := d.String(); got != tt.want {
			t.Errorf("Duration(%v).String() = %q; want %q", tt.in, got, tt.want)
		}
		if tt.in < 0 {
			if _, err := d.MarshalText(); err == nil {
				t.Errorf("MarshalText(%v) succeeded; want an error", tt.in)
			}
			continue
		}
		text, err := d.MarshalText()
		if err != nil || string(text) != tt.want {
			t.Errorf("MarshalText(%v) = %q, %v; want %q", tt.in, text, err, tt.want)
		}
		back, err := ParseDuration(tt.want)
		if err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.want, time.Duration(back), err, tt.in)
		}
	}
}

// FuzzDurationRoundTrip checks that every duration parses back from its
// String.
func FuzzDurationRoundTrip(f *testing.F) {
	for _, seed := range []int64{0, 1, int64(time.Second), int64(36 * time.Hour), 1<<63 - 1, 1234567890123} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		if n < 0 {
			n = -(n + 1)
		}
		d := Duration(n)
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %d, %v; want %d", d.String(), back, err, n)
		}
	})
}
