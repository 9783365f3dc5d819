package fakes

import "testing"

func TestSpecsLoad(t *testing.T) {
	for name, f := range map[string]func() (any, error){
		"e2b":     func() (any, error) { return E2BSpec() },
		"daytona": func() (any, error) { return DaytonaSpec() },
		"http":    func() (any, error) { return HTTPBackendSpec() },
	} {
		if _, err := f(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
