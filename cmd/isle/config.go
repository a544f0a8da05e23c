package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

const (
	// defaultConfigFile is read, if it exists, by `isle server` and `isle agent`.
	defaultConfigFile = "/etc/isle/config.yaml"
	// maxConfigFile bounds what is read of a config file.
	maxConfigFile = 64 << 10
)

// addConfigFlag gives cmd (`isle server` or `isle agent`) the --config flag,
// read by applyConfigFile.
func addConfigFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().String("config", defaultConfigFile, "YAML file of settings keyed by flag name, such as led-ready: gpio17; the command line wins over it (the default is read only if it exists; empty: none)")
}

// applyConfigFile sets cmd's flags from the file its --config flag names:
// a YAML mapping of long flag names to values (a sequence for a flag that
// takes several). Flags given on the command line win over the file. Call
// it after cobra parsed the command line, before the flags are used. Errors
// name the file, line and key, never the value of a setting that is not
// rejected (the file holds the cluster token).
func applyConfigFile(cmd *cobra.Command) error {
	fl := cmd.Flags()
	path := fl.Lookup("config").Value.String()
	if path == "" {
		return nil
	}
	doc, err := readConfigFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !fl.Changed("config"):
		return nil
	case err != nil:
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // without the path, named below
		}
		return fmt.Errorf("%s: config file %s: %w", cmd.Name(), path, err)
	}
	if err := applyConfig(fl, doc, cmd.CommandPath()); err != nil {
		return fmt.Errorf("%s: config file %s:%w", cmd.Name(), path, err)
	}
	return nil
}

// readConfigFile reads and parses one YAML document; a file without one
// gives a nil node.
func readConfigFile(path string) (*yaml.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkPrivate(f); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("larger than %d KiB", maxConfigFile>>10)
	}
	var doc, next yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("want one YAML document, not several")
	}
	return &doc, nil
}

// applyConfig sets the flags of fl from the settings in doc, a YAML
// document node (nil: none). Errors begin with the line number.
func applyConfig(fl *pflag.FlagSet, doc *yaml.Node, command string) error {
	if doc == nil || len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		return nil // only comments, or an explicit empty document
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%d: want a mapping of flag names to values, such as led-ready: gpio17", m.Line)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%d: a key is not a flag name", k.Line)
		}
		key := k.Value
		if line, ok := seen[key]; ok {
			return fmt.Errorf("%d: %s: given twice (first at line %d)", k.Line, key, line)
		}
		seen[key] = k.Line
		if err := setFromConfig(fl, key, v, command); err != nil {
			return fmt.Errorf("%d: %s: %w", k.Line, key, err)
		}
	}
	return nil
}

// setFromConfig sets the flag key to the YAML value v, unless the command
// line gave it.
func setFromConfig(fl *pflag.FlagSet, key string, v *yaml.Node, command string) error {
	flag := fl.Lookup(key)
	switch {
	case key == "config" || key == "help":
		return errors.New("not allowed in a config file (give it on the command line)")
	case flag == nil && nearestFlag(fl, key) != "":
		return fmt.Errorf("no such flag of %s (did you mean %s?)", command, nearestFlag(fl, key))
	case flag == nil:
		return fmt.Errorf("no such flag of %s", command)
	}
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	sv, several := flag.Value.(pflag.SliceValue)
	switch {
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
		return errors.New("no value (remove the line to keep the default)")
	case v.Kind != yaml.ScalarNode && v.Kind != yaml.SequenceNode:
		return errors.New("want a value or a list of values, not a mapping")
	case v.Kind == yaml.SequenceNode && !several:
		return errors.New("takes one value, not a list")
	}
	vals := []string{}
	for _, e := range v.Content { // a sequence's elements
		if e.Kind != yaml.ScalarNode || e.ShortTag() == "!!null" {
			return fmt.Errorf("line %d: want each element a value", e.Line)
		}
		vals = append(vals, e.Value)
	}
	switch {
	case fl.Changed(key):
		return nil // the command line wins
	case v.Kind == yaml.ScalarNode:
		return fl.Set(key, v.Value)
	}
	flag.Changed = true // as fl.Set does: the flag counts as given
	return sv.Replace(vals)
}

// nearestFlag returns the name of fl's flag that begins with most of key
// (underscores read as dashes), if at least three letters and half of key;
// else "".
func nearestFlag(fl *pflag.FlagSet, key string) string {
	key = strings.ToLower(strings.ReplaceAll(key, "_", "-"))
	best, most := "", max(3, (len(key)+1)/2)-1
	fl.VisitAll(func(f *pflag.Flag) {
		n := 0
		for n < len(key) && n < len(f.Name) && key[n] == f.Name[n] {
			n++
		}
		if n > most {
			best, most = f.Name, n
		}
	})
	return best
}
