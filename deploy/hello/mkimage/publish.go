package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push writes idx and its images to the registry as ref, with the
// credentials of `docker login` if there are any.
func push(ctx context.Context, ref name.Tag, idx v1.ImageIndex) error {
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	slog.Info("mkimage: pushed", "ref", ref.String())
	return nil
}

// writeLayout writes idx as an OCI image layout in dir (new or empty),
// its index.json naming idx ref the way containerd reads it on import.
func writeLayout(dir string, ref name.Tag, idx v1.ImageIndex) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("-o %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("-o %s: the directory is not empty (give a new or empty one)", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("-o %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ref.Name(),
	})); err != nil {
		return fmt.Errorf("-o %s: %w", dir, err)
	}
	slog.Info("mkimage: wrote layout", "dir", dir, "name", ref.Name())
	return nil
}
