package schema

import (
	"testing"
	"testing/fstest"
)

func TestLoadOrdersByVersion(t *testing.T) {
	ms, err := Load(fstest.MapFS{
		"0010_ten.sql": {Data: []byte(`SELECT 10;`)},
		"0002_two.sql": {Data: []byte(`SELECT 2;`)},
		"README.md":    {Data: []byte(`not a migration`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Name != "0002_two" || ms[1].Version != 10 || ms[1].SQL != `SELECT 10;` || Latest(ms) != 10 {
		t.Fatalf("Load = %+v", ms)
	}
	if Latest(nil) != 0 {
		t.Fatal("Latest of none is not 0")
	}
}

func TestBadMigrationNames(t *testing.T) {
	for _, fsys := range []fstest.MapFS{
		{"init.sql": {Data: []byte(`SELECT 1;`)}},
		{"0000_zero.sql": {Data: []byte(`SELECT 1;`)}},
		{"0001_a.sql": {Data: []byte(`SELECT 1;`)}, "1_b.sql": {Data: []byte(`SELECT 1;`)}},
	} {
		if _, err := Load(fsys); err == nil {
			t.Errorf("Load(%v) accepted bad names", fsys)
		}
	}
}
