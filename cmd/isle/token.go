package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// maxTokenFile bounds what is read of a token file.
const maxTokenFile = 4 << 10

// checkPrivate refuses a file its group or others may read or write: it
// holds, or may hold, the cluster token.
func checkPrivate(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o066 != 0 {
		return fmt.Errorf("other users may read or write it (mode %04o), and it may hold the cluster token: chmod 600 %s", perm, f.Name())
	}
	return nil
}

// readTokenFile reads a cluster token from path (--token-file), a file
// only its owner may read.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	if err := checkPrivate(f); err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxTokenFile:
		return "", fmt.Errorf("--token-file %s: larger than %d KiB; want the token alone", path, maxTokenFile>>10)
	case tok == "" || strings.ContainsAny(tok, " \t\n"):
		return "", fmt.Errorf("--token-file %s: want the token alone, on one line", path)
	}
	return tok, nil
}

// takeTokenFile sets *token from tokenFile, if given; a token given both
// ways is refused.
func takeTokenFile(token *string, tokenFile string) error {
	if tokenFile == "" {
		return nil
	}
	if *token != "" {
		return fmt.Errorf("--token and --token-file: give one, not both")
	}
	tok, err := readTokenFile(tokenFile)
	if err != nil {
		return err
	}
	*token = tok
	return nil
}

// warnTokenArgument warns when the token is on the command line args,
// where every user of the board reads it (/proc/PID/cmdline, ps).
func warnTokenArgument(args []string, log *slog.Logger) {
	for _, a := range args {
		if a == "--token" || strings.HasPrefix(a, "--token=") {
			log.Warn("--token on the command line is visible to every user of the board (ps, /proc/PID/cmdline): give --token-file FILE (mode 0600), or token: in the config file")
			return
		}
	}
}
