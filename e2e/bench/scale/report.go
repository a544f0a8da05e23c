package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

const mib = 1 << 20

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

// report writes the growth tables, the failures and the targets.
func report(w io.Writer, env benchkit.Env, rs []result, fr finalResults) {
	fmt.Fprintln(w, "The API at each size (ms; requests spread over the three servers, 4 at a time; lists one at a time):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| boards | pods | get p50/p99 | list ns Table p50/p99 (pods) | list all Table p50/p99 | create p50/p99 | update p50/p99 | write → watcher p50/p99 | errors |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		a := r.api
		fmt.Fprintf(w, "| %d | %s | %s / %s | %s / %s (%s) | %s / %s | %s / %s | %s / %s | %s / %s | %d |\n", r.boards, benchkit.Group(float64(r.deployments*replicasPer)),
			ms(a.get.p(0.5)), ms(a.get.p(0.99)), ms(a.listNS.p(0.5)), ms(a.listNS.p(0.99)), benchkit.Group(float64(a.nsPods)),
			ms(a.listAll.p(0.5)), ms(a.listAll.p(0.99)), ms(a.create.p(0.5)), ms(a.create.p(0.99)),
			ms(a.update.p(0.5)), ms(a.update.p(0.99)), ms(a.watch.p(0.5)), ms(a.watch.p(0.99)), a.errors)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The cost at each size (servers s1/s2/s3, * the store's leader; memory and CPU after the pods settled, CPU over the idle window):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| boards | pods | joins → Nodes Ready | pods bound/s | → all Running | RSS MiB | of which the binary's file pages MiB | live heap MiB | idle CPU % of a core | raft log in memory MiB | store on disk MiB | written per pod created | gossip per board | bench process CPU s growing / idle % / RSS MiB |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for i, r := range rs {
		// A size that adds no boards (or no pods) has no joins (or pods
		// placed) to time.
		joined, bound, running, written := "–", "–", "–", "–"
		if i == 0 || r.boards > rs[i-1].boards {
			joined = fmt.Sprintf("%.1f s", r.joined.Seconds())
		}
		if r.newPods > 0 {
			bound, running = benchkit.Group(float64(r.newPods)/r.bound.Seconds()), fmt.Sprintf("%.1f s", r.running.Seconds())
			written = benchkit.Group(r.writtenPerPod) + " B"
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %s | %.0f B/s | %.0f / %.1f / %.0f |\n", r.boards, benchkit.Group(float64(r.deployments*replicasPer)),
			joined, bound, running,
			per3(r, func(s serverSample) float64 { return float64(s.rss) / mib }, "%.0f"),
			per3(r, func(s serverSample) float64 { return float64(s.file) / mib }, "%.0f"),
			per3(r, func(s serverSample) float64 { return float64(s.live) / mib }, "%.1f"),
			cpu3(r), float64(r.servers[r.leader].logBytes)/mib, float64(r.servers[r.leader].storeBytes)/mib,
			written, r.gossip, r.benchGrow.Seconds(), 100*r.benchIdle, float64(r.benchRSS)/mib)
	}
	fmt.Fprintln(w)
	last := rs[len(rs)-1]
	first := rs[0]
	slopeHeap, slopeRSS := 0.0, 0.0
	if dp := float64((last.deployments - first.deployments) * replicasPer); dp > 0 {
		slopeHeap = (float64(last.servers[last.leader].live) - float64(first.servers[first.leader].live)) / dp
		slopeRSS = (float64(maxRSS(last)) - float64(maxRSS(first))) / dp
	}
	fmt.Fprintf(w, "Growth from %d to %d boards (%d to %d pods): the leader's live heap %.1f KiB and the largest RSS %.1f KiB per pod added (boards and pods grow together: a board's share is 20 pods' worth).\n\n",
		first.boards, last.boards, first.deployments*replicasPer, last.deployments*replicasPer, slopeHeap/1024, slopeRSS/1024)
	// Two sizes with the same boards give the cost of a pod alone.
	perPod, perPodAt := 0.0, ""
	for i := len(rs) - 1; i > 0; i-- {
		a, b := rs[i-1], rs[i]
		if dp := float64((b.deployments - a.deployments) * replicasPer); a.boards == b.boards && dp > 0 {
			perPod = (float64(b.servers[b.leader].live) - float64(a.servers[a.leader].live)) / dp
			perPodAt = fmt.Sprintf("at %d boards, %d to %d pods", b.boards, a.deployments*replicasPer, b.deployments*replicasPer)
			fmt.Fprintf(w, "Pods alone, %s: the leader's live heap %.1f KiB and the largest RSS %.1f KiB per pod added.\n\n",
				perPodAt, perPod/1024, (float64(maxRSS(b))-float64(maxRSS(a)))/dp/1024)
			break
		}
	}

	var t benchkit.Table
	// The memory targets are for given sizes: a size the run did not
	// reach (or started past) is said to be unmeasured, not judged by
	// another size's figure.
	rssAt := func(r result, target string, limit float64, boards, pods int) {
		measure := fmt.Sprintf("server RSS at %d boards, %d pods (largest of three)", r.boards, r.deployments*replicasPer)
		if r.boards != boards || r.deployments*replicasPer != pods {
			t.Row(measure, fmt.Sprintf("%.1f MiB", float64(maxRSS(r))/mib), "", false)
			t.Missing(fmt.Sprintf("server RSS at %d boards, %d pods (largest of three)", boards, pods), target)
			return
		}
		t.Row(measure, fmt.Sprintf("%.1f MiB", float64(maxRSS(r))/mib), target, float64(maxRSS(r)) <= limit)
	}
	rssAt(rs[0], "≤ 64 MiB", 64*mib, 10, 300)
	if perPodAt != "" {
		t.Row("the leader's live heap per stored pod ("+perPodAt+")", fmt.Sprintf("%.1f KiB", perPod/1024), "≤ 20 KiB", perPod <= 20*1024)
		t.Row("the leader's live heap per pod added with boards (slope of the growth)", fmt.Sprintf("%.1f KiB", slopeHeap/1024), "", false)
	} else {
		t.Row("the leader's live heap per stored pod (slope of the growth)", fmt.Sprintf("%.1f KiB", slopeHeap/1024), "≤ 20 KiB", slopeHeap <= 20*1024)
	}
	if len(rs) > 1 {
		rssAt(last, "≤ 256 MiB", 256*mib, 250, 5000)
	}
	mut := slices.Concat(last.api.create, last.api.update)
	t.Row(fmt.Sprintf("mutating requests p99 at %d boards (creates and updates)", last.boards), ms(latencies(mut).p(0.99))+" ms", "≤ 1 s (Kubernetes' API SLO)",
		latencies(mut).p(0.99) <= time.Second)
	t.Row(fmt.Sprintf("list of a namespace p99 at %d boards (%d pods, Table)", last.boards, last.api.nsPods), ms(last.api.listNS.p(0.99))+" ms", "≤ 5 s (Kubernetes' API SLO)",
		last.api.listNS.p(0.99) <= 5*time.Second)
	if last.api.nsPods >= 1000 {
		t.Row("list of 1,000 pods as a Table, p99", ms(last.api.listNS.p(0.99))+" ms", "≤ 100 ms", last.api.listNS.p(0.99) <= 100*time.Millisecond)
	}
	t.Row(fmt.Sprintf("write → watcher p99 at %d boards", last.boards), ms(last.api.watch.p(0.99))+" ms", "", false)
	if len(fr.notReady) > 0 {
		t.Row(fmt.Sprintf("a hollow board killed → its Node NotReady, median of %d", len(fr.notReady)),
			fmt.Sprintf("%.1f s", benchkit.Quantile(fr.notReady, 0.5).Seconds()), "≤ 40 s (Kubernetes' node-monitor-grace-period)",
			benchkit.Quantile(fr.notReady, 0.5) <= 40*time.Second)
	}
	if fr.killedLeader != "" {
		t.Row(fmt.Sprintf("the store's leader (%s) killed → another leads", fr.killedLeader), fmt.Sprintf("%.2f s", fr.elected.Seconds()), "", false)
		t.Row("the store's leader killed → a write succeeds through another server", fmt.Sprintf("%.2f s", fr.write.Seconds()), "", false)
	}
	t.Write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Notes:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "- hollow boards: a real gossip member each, joined through /isle/v1 with the agent token, running the real node agent (Node, status, usage reports, deletions) with pods that run at once. They watch their pods twice (the agent without containerd, and the hollow kubelet): a little more than real boards ask of the servers.")
	fmt.Fprintln(w, "- every hollow board keeps the watches of a board's Service rules and ingress controller open (Services, EndpointSlices, Ingresses, IngressClasses, NetworkPolicies: a watch-list, then watches resumed from the last resourceVersion, as client-go's reflector) and reads their streams to the end without decoding them into objects: the servers send each board what they would send a real one; the decoding a board would do on its own CPU is not done here.")
	fmt.Fprintln(w, "- hollow boards gossip uncompressed (memberlist's LZW allocates 64 KiB for every packet: a quarter of the CPU of 250 hollow boards in one process): the servers receive their packets uncompressed, and the gossip per board is memberlist's uncompressed bytes; the servers' own packets are compressed.")
	fmt.Fprintln(w, "- joins → Nodes Ready: the new boards join in waves (-wave, 25 by default), each wave's Nodes Ready and its members alive in every board's gossip before the next.")
	fmt.Fprintln(w, "- bench process: the hollow boards and the bench's clients in one process; CPU seconds from a size's first join to its pods settled, share of a core over the idle window, RSS after it.")
	fmt.Fprintln(w, "- the hollow boards, the bench's clients and the three servers share this machine's CPUs; on boards each has its own.")
	fmt.Fprintln(w, "- written per pod created: write_bytes of the three servers from the first Deployment of a size to 10 s after its last pod ran (pods, ReplicaSets, EndpointSlices, Events, status), divided by the pods created.")
	fmt.Fprintln(w, "- live heap: pprof's heap after a collection (the admin socket, --debug); gossip: memberlist's bytes sent and received by the process's hollow boards, per board.")
	fmt.Fprintln(w)
	env.WriteMarkdown(w)
}

func maxRSS(r result) uint64 {
	var m uint64
	for _, s := range r.servers {
		m = max(m, s.rss)
	}
	return m
}

func per3(r result, f func(serverSample) float64, format string) string {
	out := ""
	for i, s := range r.servers {
		if i > 0 {
			out += " / "
		}
		out += fmt.Sprintf(format, f(s))
		if i == r.leader {
			out += "*"
		}
	}
	return out
}

func cpu3(r result) string {
	out := ""
	for i, c := range r.cpu {
		if i > 0 {
			out += " / "
		}
		out += fmt.Sprintf("%.1f", 100*c)
	}
	return out
}
