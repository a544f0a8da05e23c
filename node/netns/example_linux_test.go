package netns_test

import (
	"context"
	"log"
	"time"

	"github.com/isle-cluster/isle/node/netns"
)

// A pod's namespace: made, used by a probe's connection, removed.
func Example() {
	const path = "/run/isle/netns/default_web-0"
	if err := netns.Create(path); err != nil {
		log.Fatal(err)
	}
	defer netns.Delete(path)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := netns.Dialer(path)(ctx, "tcp", "127.0.0.1:8080") // the pod's loopback
	if err != nil {
		log.Print(err) // nothing listens there yet
		return
	}
	c.Close()
}
