package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestImageBootsOnRaspi3b boots the image for a Pi 3 on QEMU's model of one
// (-M raspi3b: the SD card, the Pi 3's device tree and the card's
// cmdline.txt, its BCM2835 GPIO controller; its network a USB Ethernet device, as QEMU's Pi 3 has no
// network card, on the island's LAN through a tap). isle.yaml names no
// board, so the board names itself from its MAC address; it joins the
// island and lights its readiness LED on GPIO17, which isle drives through
// the kernel's GPIO character device. The test reads the pin in QEMU's GPIO
// controller as a logic probe would: an output, blinking while the board
// starts, then solid once its Node is Ready.
func TestImageBootsOnRaspi3b(t *testing.T) {
	isl := startIsland(t, 1, 0)
	card := flashImage(t, isl, "rpi3", "role: agent\ntoken: %s\njoin: [10.77.0.11]\ninterface: usb0\naddress: 10.77.0.31/24\n"+
		"gateway: 10.77.0.1\nled-ready: gpio17\n")
	lanTap(t, "pi3tap0")
	// QEMU's Pi 3 has its memory and cores; the second serial port is the
	// console (ttyS1, last so that it is /dev/console). One TCG thread: the
	// Pi 3 model wants it. The kernel command line is the card's own.
	qmpPath := filepath.Join(card.dir, "qmp.sock")
	booted, _ := bootVM(t, card, "-M", "raspi3b", "-accel", "tcg,thread=single", "-dtb", card.dtb,
		"-append", card.cmdline+" console=ttyS1,115200 systemd.journald.forward_to_console=1",
		"-drive", "file="+card.img+",if=sd,format=raw", "-serial", "null", "-serial", "file:"+card.console,
		"-netdev", "tap,id=n0,ifname=pi3tap0,script=no,downscript=no", "-device", "usb-net,netdev=n0,mac=52:54:00:ab:cd:ef",
		"-qmp", "unix:"+qmpPath+",server=on,wait=off")
	probe := startProbe(t, qmpPath, 17)
	// No hostname in isle.yaml: "isle-" and the MAC's last six digits.
	// (QEMU's USB Ethernet is one that two kernel drivers claim; the one
	// that does not know its MAC makes up a random one, hence the image's
	// order of the two: see images.overlay.)
	const name = "isle-abcdef"
	waitNodeReady(t, isl, name, 5*time.Minute)
	readyAt := time.Now()
	t.Logf("%s Ready %v after power-on", name, readyAt.Sub(booted).Round(time.Second))
	k := isl.kubectl
	if model := k.ok(t, "get", "node", name, "-o", `jsonpath={.metadata.labels.isle\.dev/board-model}`); model != "raspberry-pi-3-model-b" {
		t.Errorf("board model %q, want raspberry-pi-3-model-b (from the Pi 3's device tree)", model)
	}

	// Ready shows as a solid light; under emulation the board is slow
	// enough to fall NotReady for a moment after joining (containerd late to
	// answer), so wait for it to settle.
	waitFor(t, 2*time.Minute, "GPIO17 high for 3 s (the readiness LED solid)", func() bool {
		level, since := probe.level()
		return level && time.Since(since) > 3*time.Second
	})
	if !probe.output() {
		t.Error("GPIO17 is not an output in the GPIO controller's function select")
	}
	edges := probe.edges(booted, readyAt)
	if len(edges) < 4 {
		t.Errorf("GPIO17 changed %d times before the Node was Ready, want a blinking LED (at least 4 edges)", len(edges))
	}
	var on []time.Duration
	for i := 1; i < len(edges); i++ {
		if edges[i-1].level {
			on = append(on, edges[i].at.Sub(edges[i-1].at))
		}
	}
	slices.Sort(on)
	if len(on) > 0 {
		t.Logf("GPIO17 before Ready: %d edges, the first %v after power-on; lit phases median %v (starting blinks 500 ms, not ready 125 ms)",
			len(edges), edges[0].at.Sub(booted).Round(100*time.Millisecond), on[len(on)/2].Round(time.Millisecond))
	}
	// The agent writes the LED's pattern to its Node after the LED turns
	// solid, which on the emulated board can come after Ready is seen.
	var ann string
	deadline := time.Now().Add(30 * time.Second)
	for ann != "solid" && time.Now().Before(deadline) {
		if ann = k.ok(t, "get", "node", name, "-o", `jsonpath={.metadata.annotations.isle\.dev/led-ready}`); ann != "solid" {
			time.Sleep(time.Second)
		}
	}
	if ann != "solid" {
		t.Errorf("the Node's isle.dev/led-ready %q 30 s after Ready, want solid", ann)
	}
}

// BCM2835 GPIO registers, physical addresses on the Pi 3.
const (
	bcmGPFSEL0 = 0x3f200000 // function select, 3 bits a pin, 10 pins a register
	bcmGPLEV0  = 0x3f200034 // levels of pins 0-31
)

// probe samples one pin of QEMU's BCM2835 GPIO model through QMP every
// 20 ms, keeping its edges.
type probe struct {
	mu       sync.Mutex
	pin      int
	isOutput bool
	last     edge
	all      []edge
}

type edge struct {
	at    time.Time
	level bool
}

func startProbe(t *testing.T, qmpPath string, pin int) *probe {
	t.Helper()
	var q *qmp
	waitFor(t, 30*time.Second, "QEMU's QMP socket", func() bool {
		var err error
		q, err = dialQMP(qmpPath)
		return err == nil
	})
	p := &probe{pin: pin}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		q.close()
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			lev, err := q.readWord(bcmGPLEV0)
			if err != nil {
				return // QEMU ended
			}
			fsel, err := q.readWord(bcmGPFSEL0 + uint32(4*(pin/10)))
			if err != nil {
				return
			}
			p.sample(time.Now(), lev>>pin&1 == 1, fsel>>(3*(pin%10))&7 == 1)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *probe) sample(at time.Time, level, output bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isOutput = p.isOutput || output
	if len(p.all) == 0 || level != p.last.level {
		p.last = edge{at, level}
		p.all = append(p.all, p.last)
	}
}

// level is the pin's level and since when it has held it.
func (p *probe) level() (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last.level, p.last.at
}

// output tells whether the pin was ever seen set as an output.
func (p *probe) output() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isOutput
}

// edges are the pin's changes between from and to (the first sample
// counts as none).
func (p *probe) edges(from, to time.Time) []edge {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []edge
	for i, e := range p.all {
		if i > 0 && !e.at.Before(from) && e.at.Before(to) {
			out = append(out, e)
		}
	}
	return out
}

// qmp is a client of QEMU's machine protocol, for its human monitor's
// commands.
type qmp struct {
	conn net.Conn
	in   *bufio.Reader
}

func dialQMP(path string) (*qmp, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	q := &qmp{conn: c, in: bufio.NewReader(c)}
	if _, err := q.in.ReadBytes('\n'); err != nil { // the greeting
		c.Close()
		return nil, err
	}
	if _, err := q.execute(`{"execute":"qmp_capabilities"}`); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmp) close() { q.conn.Close() }

// execute sends one command and returns its result, skipping events.
func (q *qmp) execute(cmd string) (json.RawMessage, error) {
	if err := q.conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := q.conn.Write([]byte(cmd + "\n")); err != nil {
		return nil, err
	}
	for {
		line, err := q.in.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var r struct {
			Return json.RawMessage
			Error  *struct{ Desc string }
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("qmp: %q: %w", line, err)
		}
		switch {
		case r.Error != nil:
			return nil, errors.New("qmp: " + r.Error.Desc)
		case r.Return != nil:
			return r.Return, nil
		}
	}
}

// readWord reads a 32-bit word at a guest physical address, a device's
// register included, with the monitor's xp.
func (q *qmp) readWord(addr uint32) (uint32, error) {
	cmd, _ := json.Marshal(map[string]any{"execute": "human-monitor-command",
		"arguments": map[string]string{"command-line": fmt.Sprintf("xp /1wx %#x", addr)}})
	ret, err := q.execute(string(cmd))
	if err != nil {
		return 0, err
	}
	var out string
	if err := json.Unmarshal(ret, &out); err != nil {
		return 0, fmt.Errorf("qmp: xp: %w", err)
	}
	// "000000003f200034: 0x00020000\r\n"
	_, val, ok := strings.Cut(strings.TrimSpace(out), ": ")
	v, err := strconv.ParseUint(strings.TrimPrefix(val, "0x"), 16, 32)
	if !ok || err != nil {
		return 0, fmt.Errorf("qmp: xp %#x: %q", addr, out)
	}
	return uint32(v), nil
}
