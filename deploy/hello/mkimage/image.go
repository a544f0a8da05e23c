package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// created is the creation time of every image and the time of every file
// in it, so that the same source gives the same digests.
var created = time.Unix(0, 0).UTC()

const (
	// port is where the app listens (its PORT default).
	port = "8080"

	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n"
)

// newIndex builds the image index of one image per platform; bins holds
// the app's binary for each platform, in the same order.
func newIndex(platforms []platform, bins [][]byte) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, len(platforms))
	for i, p := range platforms {
		img, err := newImage(p, bins[i])
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", p.name, err)
		}
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: "linux", Architecture: p.goarch, Variant: p.variant},
		}}
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// newImage builds the one-layer image of the app for p.
func newImage(p platform, bin []byte) (v1.Image, error) {
	layerTar, err := layerOf(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "mkimage: /hello, /etc/passwd, /etc/group, /tmp"},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS, cf.Architecture, cf.Variant = "linux", p.goarch, p.variant
	cf.Config = v1.Config{
		Entrypoint:   []string{"/hello"},
		Env:          []string{"PORT=" + port},
		ExposedPorts: map[string]struct{}{port + "/tcp": {}},
	}
	return mutate.ConfigFile(img, cf)
}

// layerOf is the image's only layer, as a tar: the binary at /hello,
// /etc/passwd and /etc/group with root and nobody, and /tmp; everything
// owned by root, with the fixed time.
func layerOf(bin []byte) ([]byte, error) {
	entries := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o644, []byte(group)},
		{"etc/passwd", 0o644, []byte(passwd)},
		{"hello", 0o755, bin},
		{"tmp/", 0o1777, nil},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created, Uname: "root", Gname: "root",
			Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}
