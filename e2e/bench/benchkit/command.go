package benchkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main is a benchmark command's main function. It logs progress to
// stderr, parses the command line with parse, and runs run with a context
// that SIGINT and SIGTERM cancel, so that run can stop what it started.
// It exits with status 2 when the flags are wrong, 1 when run fails.
func Main[O any](name string, parse func(args []string) (O, error), run func(context.Context, O) error) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2) // the flag set has printed its usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Flags are the flags of every benchmark of the isle binary.
type Flags struct {
	Isle string // -isle: path of the isle binary; required
	Keep bool   // -keep: keep the temporary directory, data and logs
}

// NewFlagSet returns the flag set of the command name, with -isle and
// -keep defined on f.
func (f *Flags) NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.Isle, "isle", "", "path of the isle binary (required)")
	fs.BoolVar(&f.Keep, "keep", false, "keep the data directory and the logs")
	return fs
}

// Parse parses args with fs, allowing no arguments besides the flags, and
// requires -isle.
func (f *Flags) Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("flags: unexpected arguments %q", fs.Args())
	}
	if f.Isle == "" {
		return errors.New("flags: -isle PATH is required (make build puts it in out/isle)")
	}
	return nil
}
