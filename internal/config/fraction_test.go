package config

import (
	"strings"
	"testing"
)

func TestParseFraction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Fraction
	}{
		{"off", 0},
		{"85%", 0.85},
		{"85.5%", 0.855},
		{"1%", 0.01},
		{"99.9%", 0.999},
		{"0.85", 0.85},
		{"8.5e-1", 0.85},
		{"0.000_1", 0.0001},
	}
	for _, tt := range tests {
		got, err := ParseFraction(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseFraction(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		var f Fraction
		if err := f.UnmarshalText([]byte(tt.in)); err != nil || f != tt.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tt.in, f, err, tt.want)
		}
	}
}

func TestParseFractionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", `"" is not a fraction`},
		{"%", `"%" is not a fraction`},
		{"85 %", `"85 %" is not a fraction`},
		{"high", `"high" is not a fraction: write e.g. 0.85 or "85%", or "off"`},
		{"0", `"0" is not between 0 and 1: to turn the watermark off write "off"`},
		{"0%", `"0%" is not between 0 and 1: to turn the watermark off`},
		{"100%", `"100%" is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`},
		{"185%", `"185%" is not between 0 and 1 (exclusive)`},
		{"1", `"1" is not between 0 and 1 (exclusive)`},
		{"-0.5", `"-0.5" is not between 0 and 1`},
		{"NaN", `"NaN" is not between 0 and 1`},
		{"inf", `"inf" is not between 0 and 1`},
		{"Off", `"Off" is not a fraction`},
	}
	for _, tt := range tests {
		got, err := ParseFraction(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFraction(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.want)
		}
	}
}

func TestFractionString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   Fraction
		want string
	}{{0, "off"}, {0.85, "0.85"}, {0.855, "0.855"}} {
		text, err := tt.in.MarshalText()
		if tt.in.String() != tt.want || err != nil || string(text) != tt.want {
			t.Errorf("Fraction(%v): String %q, MarshalText %q, %v; want %q", float64(tt.in), tt.in.String(), text, err, tt.want)
		}
		back, err := ParseFraction(tt.want)
		if err != nil || back != tt.in {
			t.Errorf("ParseFraction(%q) = %v, %v; want %v", tt.want, back, err, tt.in)
		}
	}
}
