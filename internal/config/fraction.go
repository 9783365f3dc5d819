package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Fraction is a share of a filesystem's size, strictly between 0 and 1. In
// the configuration it is a TOML number (0.85) or a percentage string
// ("85%"); a string holding a number ("0.85") is accepted too.
//
// The string "off" gives the zero Fraction, which turns a watermark off (to
// cancel, in one source table, a disk budget set in [policy]). A written
// 0, 0.0 or "0%" is rejected rather than read as off, as is anything at or
// beyond 1 (100%).
type Fraction float64

// ParseFraction parses the configuration syntax described on Fraction.
func ParseFraction(s string) (Fraction, error) {
	if s == "off" {
		return 0, nil
	}
	num, percent := strings.CutSuffix(s, "%")
	num = strings.ReplaceAll(num, "_", "")
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf(`%q is not a fraction: write e.g. 0.85 or "85%%", or "off"`, s)
	}
	if percent {
		// Shift the decimal point in the text, so that "99.9%" is the
		// float nearest 0.999 (99.9/100 is not); fall back to dividing.
		if g, err := strconv.ParseFloat(num+"e-2", 64); err == nil {
			f = g
		} else {
			f /= 100
		}
	}
	if err := checkFraction(f); err != nil {
		return 0, fmt.Errorf("%q %w", s, err)
	}
	return Fraction(f), nil
}

// checkFraction reports a value that is not strictly between 0 and 1. Its
// message reads after the value: "%q is not ...".
func checkFraction(f float64) error {
	switch {
	case f == 0:
		return errors.New(`is not between 0 and 1: to turn the watermark off write "off"`)
	case !(f > 0 && f < 1): // also catches NaN
		return errors.New(`is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`)
	}
	return nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseFraction.
func (f *Fraction) UnmarshalText(text []byte) error {
	v, err := ParseFraction(string(text))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// MarshalText implements encoding.TextMarshaler; the text parses back to f.
func (f Fraction) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// String formats f as a plain number ("0.85"), or "off" for zero.
func (f Fraction) String() string {
	if f == 0 {
		return "off"
	}
	return strconv.FormatFloat(float64(f), 'f', -1, 64)
}
