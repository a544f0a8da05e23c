package podnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// store keeps the Pod network's state in files of one directory: a record
// per attached pod (pod-<uid>.json), the last address handed out (last)
// and the LAN link's settings before SetPodCIDR changed them (lan.json).
// Every file is written to a temporary file, synced, renamed into place,
// and the directory synced, so a crash leaves the old or the new file and
// at most a temporary one, which load removes.
type store struct {
	dir string
	log *slog.Logger
}

const (
	lastFile = "last"
	lanFile  = "lan.json"
)

// load reads the records and the last address handed out (zero if none),
// and removes the temporary files a crash left. A record it cannot read
// or trust is an error naming its file.
func (s store) load(cluster netip.Prefix) (map[types.UID]*record, netip.Addr, error) {
	var last netip.Addr
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, last, fmt.Errorf("podnet: state: %w", err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, last, fmt.Errorf("podnet: state: %w", err)
	}
	records := map[types.UID]*record{}
	byIP := map[netip.Addr]string{}
	var errs []error
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(s.dir, e.Name())
		switch {
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp"):
			s.log.Info("podnet: removing a temporary file left by a crash", "file", path)
			if err := os.Remove(path); err != nil {
				errs = append(errs, fmt.Errorf("podnet: state: %w", err))
			}
		case name == lastFile:
			b, err := os.ReadFile(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("podnet: state: %w", err))
				continue
			}
			if last, err = netip.ParseAddr(strings.TrimSpace(string(b))); err != nil || !last.Is4() {
				errs = append(errs, fmt.Errorf("podnet: state file %s: %q is not an IPv4 address", path, b))
			}
		case strings.HasPrefix(name, "pod-") && strings.HasSuffix(name, ".json"):
			b, err := os.ReadFile(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("podnet: state: %w", err))
				continue
			}
			r, err := parseRecord(path, b, cluster)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if other, ok := byIP[r.IP]; ok {
				errs = append(errs, fmt.Errorf("podnet: records %s and %s hold the same address %v", other, path, r.IP))
				continue
			}
			byIP[r.IP] = path
			records[r.UID] = r
		case name == lanFile:
		default:
			s.log.Warn("podnet: ignoring a file the Pod network did not write", "file", path)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, last, err
	}
	return records, last, nil
}

// put writes r's record.
func (s store) put(r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("podnet: record of %s: %w", r.key(), err)
	}
	return s.write(recordName(r.UID), append(b, '\n'))
}

// remove deletes the record of uid; a missing one is not an error.
func (s store) remove(uid types.UID) error {
	err := os.Remove(filepath.Join(s.dir, recordName(uid)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("podnet: state: %w", err)
	}
	return s.syncDir()
}

// putLast records a as the last address handed out.
func (s store) putLast(a netip.Addr) error {
	return s.write(lastFile, []byte(a.String()+"\n"))
}

// write replaces the file name with data, durably.
func (s store) write(name string, data []byte) error {
	f, err := os.CreateTemp(s.dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("podnet: state: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(s.dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("podnet: state: write %s: %w", name, err)
	}
	return s.syncDir()
}

func (s store) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("podnet: state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("podnet: state: sync %s: %w", s.dir, err)
	}
	return nil
}

// lanSettings are the LAN link's sysctls before SetPodCIDR first changed
// them, restored by Uninstall.
type lanSettings struct {
	Link       string `json:"link"`
	Forwarding string `json:"forwarding"`
	RPFilter   string `json:"rpFilter"`
}

// lan reads the saved LAN settings; ok is false if there are none.
func (s store) lan() (l lanSettings, ok bool, err error) {
	path := filepath.Join(s.dir, lanFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("podnet: state: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, false, fmt.Errorf("podnet: state file %s: %w", path, err)
	}
	if checkLinkName(l.Link) != nil || !isSysctlInt(l.Forwarding) || !isSysctlInt(l.RPFilter) {
		return l, false, fmt.Errorf("podnet: state file %s: bad settings %+v", path, l)
	}
	return l, true, nil
}

func (s store) putLAN(l lanSettings) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("podnet: state: %w", err)
	}
	return s.write(lanFile, append(b, '\n'))
}

// isSysctlInt reports whether v is a small number, as forwarding and
// rp_filter hold.
func isSysctlInt(v string) bool {
	return len(v) == 1 && v[0] >= '0' && v[0] <= '9'
}
