// Package pageout hands back to the kernel the pages of the running
// executable that the process has stopped using.
//
// isle is one binary: an agent board runs a fraction of its code, a
// server more, neither all of it. At start each touches much more of it
// than it goes on using (the init functions of every package, the flag
// and configuration code, an agent's first sync of its pods, a server's
// first reconcile), and the kernel maps 64 KiB around each page it reads
// (fault-around): the text and read-only data of the binary then stay in
// the resident set for good, about 30 MiB of a 40 MiB binary. [Pages.Release] tells the kernel that
// the process no longer needs the pages of the executable's read-only
// mappings (text and rodata; never the writable data and bss, which hold
// the program's variables). The pages stay in the page cache: those the
// process uses again come back at the next touch through a minor fault,
// without reading the file, and the resident set shrinks to what is in
// use. Fault-around would bring back 64 KiB with each of them, whatever
// the advice, but not past the end of a mapping: [Find] cuts the
// mappings into pieces of 4 KiB, which the kernel keeps apart. [Run] does
// it after start-up and then now and then, for the pages that rare work
// (a burst of pod starts, a certificate renewal) brought back.
//
// The kernel's documentation of the advice is madvise(2); the mappings
// are those of /proc/self/maps (proc_pid_maps(5)).
package pageout
