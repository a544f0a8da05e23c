package ingress

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/isle-cluster/isle/control/wire"
)

// ControllerName is the spec.controller of the IngressClasses this
// controller serves.
const ControllerName = wire.IngressController

// Config configures a Controller.
type Config struct {
	// HTTPAddr is the address plain HTTP is served on; default ":80".
	HTTPAddr string
	// HTTPSAddr is the address HTTPS is served on; default ":443".
	HTTPSAddr string
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// validate fills the defaults of unset fields and rejects bad values.
func (c Config) validate() (Config, error) {
	if c.HTTPAddr == "" {
		c.HTTPAddr = ":80"
	}
	if c.HTTPSAddr == "" {
		c.HTTPSAddr = ":443"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if err := checkAddr(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTPAddr: %w", err))
	}
	if err := checkAddr(c.HTTPSAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTPSAddr: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("ingress: config: %w", err)
	}
	return c, nil
}

// checkAddr accepts host:port addresses with a numeric port (0 picks a
// free one).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port, such as :80", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number in 0..65535", addr, port)
	}
	return nil
}
