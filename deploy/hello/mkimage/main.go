// Command mkimage builds the tutorial's hello image (deploy/hello) for
// every board's platform, without docker: it cross-compiles the app with
// the go command, puts each static binary in a one-layer OCI image, and
// joins the images in an OCI image index, which it pushes to a registry
// or writes as an OCI image layout directory. Run it inside the isle
// module:
//
//	go run ./deploy/hello/mkimage -push 10.77.0.1:5000/isle/hello:1.0   (the island's registry)
//	go run ./deploy/hello/mkimage -platforms linux/arm/v6 -o /tmp/hello
//
// The same source gives the same digests: the build is reproducible and
// the images carry a fixed creation time. A layout directory made into a
// tar (tar -C DIR -cf hello.tar .) loads with `isle images import` on a
// board without a registry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// appPackage is the Go package of the app in the image.
const appPackage = "github.com/isle-cluster/isle/deploy/hello"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// options are mkimage's command line, checked.
type options struct {
	platforms []platform
	push      name.Tag // with -push
	out       string   // -o
	name      name.Tag // the image's name in the layout written with -o
	pkg       string   // the Go package to build: appPackage
}

// run is mkimage with its command line args; it prints the index digest
// to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	return o.make(ctx, stdout)
}

func parseArgs(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	platforms := fs.String("platforms", strings.Join(knownNames(), ","), "comma-separated platforms to build for")
	push := fs.String("push", "", "push the image index to the registry as `HOST:PORT/REPO:TAG` (plain HTTP allowed)")
	out := fs.String("o", "", "write an OCI image layout to `DIR` (new or empty)")
	imageName := fs.String("name", "registry.island/isle/hello:1.0", "with -o, the image's `REF` recorded in the layout (the name `isle images import` gives it)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: go run ./deploy/hello/mkimage [-platforms LIST] (-push REF | -o DIR [-name REF])")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	o := options{out: *out, pkg: appPackage}
	var err error
	if o.platforms, err = parsePlatforms(*platforms); err != nil {
		return options{}, err
	}
	switch {
	case *push == "" && *out == "":
		return options{}, errors.New("give -push REF or -o DIR (see -h)")
	case *push != "" && *out != "":
		return options{}, errors.New("give -push REF or -o DIR, not both")
	case *push != "":
		if o.push, err = parseRef("-push", *push); err != nil {
			return options{}, err
		}
	default:
		if o.name, err = parseRef("-name", *imageName); err != nil {
			return options{}, err
		}
	}
	return o, nil
}

// parseRef reads a full image reference with a tag; the registry may be
// any host, over plain HTTP.
func parseRef(flagName, ref string) (name.Tag, error) {
	t, err := name.NewTag(ref, name.StrictValidation, name.Insecure)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%s %q: %w (want HOST:PORT/REPO:TAG, e.g. 127.0.0.1:5000/isle/hello:1.0)", flagName, ref, err)
	}
	return t, nil
}

// make builds the index and pushes or writes it.
func (o options) make(ctx context.Context, stdout io.Writer) error {
	bins, err := compileAll(ctx, o.pkg, o.platforms)
	if err != nil {
		return err
	}
	idx, err := newIndex(o.platforms, bins)
	if err != nil {
		return err
	}
	if o.out != "" {
		err = writeLayout(o.out, o.name, idx)
	} else {
		err = push(ctx, o.push, idx)
	}
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("index digest: %w", err)
	}
	_, err = fmt.Fprintln(stdout, d)
	return err
}
