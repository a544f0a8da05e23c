package hw

import (
	"path/filepath"
	"testing"
)

func TestReadPIDs(t *testing.T) {
	for _, tc := range []struct {
		name, loadavg, pidMax string
		want                  PIDs
		wantErr               bool
	}{
		{"pi zero", "0.20 0.18 0.12 1/80 11206\n", "32768\n", PIDs{Used: 80, Max: 32768}, false},
		{"64-bit default", "3.01 2.50 2.00 4/1210 99999\n", "4194304\n", PIDs{Used: 1210, Max: 4194304}, false},
		{"no tasks field", "0.20 0.18 0.12\n", "32768\n", PIDs{}, true},
		{"tasks without slash", "0.20 0.18 0.12 80 11206\n", "32768\n", PIDs{}, true},
		{"tasks not a number", "0.20 0.18 0.12 1/x 11206\n", "32768\n", PIDs{}, true},
		{"pid_max not a number", "0.20 0.18 0.12 1/80 11206\n", "lots\n", PIDs{}, true},
		{"pid_max zero", "0.20 0.18 0.12 1/80 11206\n", "0\n", PIDs{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readPIDs(writeFile(t, tc.loadavg), writeFile(t, tc.pidMax))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := readPIDs(missing, writeFile(t, "32768\n")); err == nil {
		t.Fatal("a missing loadavg read without error")
	}
	if p, err := ReadPIDs(); err != nil || p.Used <= 0 || p.Max < p.Used {
		t.Fatalf("this machine: %+v, %v", p, err)
	}
}
