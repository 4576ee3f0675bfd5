// Package testkit holds, in its subpackages, the helpers that only tests
// import (docs/architecture.md's TestArchitectureMap checks that no other
// package does):
//
//   - approvalcases: the approval bindings that must never let a call
//     through, run by the engine's, the CLI's and the sidecar's tests;
//   - receiptcases: the execution-receipt forgeries every verifier must
//     reject, and the shipped refund example the receipt benchmarks decide;
//   - limitstest: decode limits crossed by one;
//   - spectable: the spec's rule-by-rule fact tables (facts/testdata/spec);
//   - strictjson: an independent oracle for the JSON scanner;
//   - gen: generated histories and registries for fuzzing, property tests
//     and benchmarks;
//   - racetest: whether a test runs under the race detector;
//   - redistest: a real redis-server, or a three-node Redis Cluster,
//     for the gateway's session store tests;
//   - handlertest: the sidecar's HTTP handler in process;
//   - syncbuf: the one locked buffer, bytes a test reads while goroutines
//     write them;
//   - cputime: the process's CPU time per benchmark iteration
//     (cpu-ns/op);
//   - gatewaytest: what the gateway's clients in tests share (the
//     scripted sessions' registry, a call's text, a bearer token);
//   - servetest: policycheck serve in a process of its own, and its floor
//     server (servetest/floor) for the load tests;
//   - floor: the floor's handler, which that command serves and in-process
//     benchmarks call.
package testkit
