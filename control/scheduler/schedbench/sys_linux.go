package main

import "syscall"

// childAttr puts the server in its own process group and has the kernel
// kill it if this process dies without tearing down.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
