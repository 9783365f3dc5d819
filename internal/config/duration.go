package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a non-negative length of time, written in the configuration as
// a string of one or more numbers, each followed by a unit:
//
//	"14d"  "1d12h"  "90m"  "30s"  "1.5h"  "2w"  "500ms"
//
// Units: w (7 days), d (24 hours), h, m, s, ms, us (or µs), ns. Go's
// time.ParseDuration syntax is accepted as it is, plus w and d. A number may
// have a fraction ("1.5h"). Rejected: a sign (negative durations make no
// sense for a policy), spaces, a number without a unit ("14": days or
// hours?), unknown units, the empty string, and values beyond about 292
// years.
//
// "0" (or any zero such as "0s") and "off" both give the zero Duration. For
// every duration key zero means the feature is off: no retention, no idle
// suspend, no lifetime cap, and for grace no notice period. Leaving a key out
// is different: it inherits (source table ← [policy] ← built-in default).
type Duration time.Duration

const (
	day  = 24 * time.Hour
	week = 7 * day
)

var durationUnits = map[string]uint64{
	"ns": uint64(time.Nanosecond),
	"us": uint64(time.Microsecond),
	"µs": uint64(time.Microsecond), // U+00B5 micro sign
	"μs": uint64(time.Microsecond), // U+03BC Greek mu
	"ms": uint64(time.Millisecond),
	"s":  uint64(time.Second),
	"m":  uint64(time.Minute),
	"h":  uint64(time.Hour),
	"d":  uint64(day),
	"w":  uint64(week),
}

// ParseDuration parses the configuration syntax described on Duration.
func ParseDuration(s string) (Duration, error) {
	switch s {
	case "":
		return 0, errors.New(`empty duration: write "off" or leave the key out`)
	case "0", "off":
		return 0, nil
	}
	switch s[0] {
	case '-':
		return 0, fmt.Errorf("%q: negative durations are not allowed", s)
	case '+':
		return 0, fmt.Errorf("%q: write the duration without a sign", s)
	}
	var total uint64
	for rest := s; rest != ""; {
		i := digits(rest)
		whole := rest[:i]
		rest = rest[i:]
		var frac string
		if rest != "" && rest[0] == '.' {
			j := digits(rest[1:])
			frac = rest[1 : 1+j]
			rest = rest[1+j:]
		}
		if whole == "" && frac == "" {
			return 0, fmt.Errorf(`%q is not a duration: write a number and a unit, e.g. "14d", "1d12h" or "90m"`, s)
		}
		k := 0
		for k < len(rest) && rest[k] != '.' && !isDigit(rest[k]) {
			k++
		}
		unit := rest[:k]
		rest = rest[k:]
		if unit == "" {
			return 0, fmt.Errorf(`%q: the number has no unit: write e.g. "%sd", "%sh" or "%sm"`, s, whole, whole, whole)
		}
		mult, ok := durationUnits[unit]
		if !ok {
			return 0, fmt.Errorf("%q: unknown unit %q (use w, d, h, m, s, ms, us or ns)", s, unit)
		}
		var n uint64
		if whole != "" {
			var err error
			if n, err = strconv.ParseUint(whole, 10, 64); err != nil {
				return 0, fmt.Errorf("%q: too long", s)
			}
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("%q: too long", s)
		}
		v := n * mult
		if frac != "" {
			// As time.ParseDuration: the digits as an integer over a
			// power of ten, so that "1.000000247s" is exact.
			var f uint64
			scale := 1.0
			for _, c := range []byte(frac) {
				if f > (math.MaxInt64-9)/10 {
					break // more digits than a nanosecond needs
				}
				f = f*10 + uint64(c-'0')
				scale *= 10
			}
			v += uint64(float64(f) * (float64(mult) / scale))
		}
		if v > math.MaxInt64-total {
			return 0, fmt.Errorf("%q: too long", s)
		}
		total += v
	}
	return Duration(total), nil
}

func digits(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// UnmarshalText implements encoding.TextUnmarshaler with ParseDuration.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalText implements encoding.TextMarshaler; the text parses back to d.
func (d Duration) MarshalText() ([]byte, error) {
	if d < 0 {
		return nil, fmt.Errorf("marshal duration: %v is negative", time.Duration(d))
	}
	return []byte(d.String()), nil
}

// String formats d in the configuration syntax using days, hours, minutes
// and seconds, e.g. "14d", "1d12h", "1h30m", "1.5s"; zero is "0s". The
// result parses back to d. Negative values (possible only in code) are
// formatted by time.Duration.
func (d Duration) String() string {
	x := time.Duration(d)
	if x == 0 {
		return "0s"
	}
	if x < 0 {
		return x.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		size time.Duration
		name string
	}{{day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if n := x / u.size; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			x -= n * u.size
		}
	}
	if x > 0 {
		b.WriteString(x.String()) // under a minute: "30s", "1.5s", "500ms"
	}
	return b.String()
}
