// Package faults lets a test make a decision's path fail at a named point:
// the test puts a function in the request's context (With), and the code
// on the path calls At with the point's name. Nothing is global: without
// a function in the context At does nothing, at the cost of a context
// lookup.
package faults

import "context"

type key struct{}

// Points on a decision's path.
const (
	// EngineDecide is inside engine.Engine.Decide, after the input is
	// prepared and before the policy is evaluated.
	EngineDecide = "engine.decide"
	// RunStep is inside engine.Run.Step, after the step's messages are
	// appended to the run and before the decision.
	RunStep = "engine.run.step"
	// ServerStamp is inside the sidecar's run step, after the decision
	// and its receipts (engine.WithReceipts) are made and before the run
	// records the step (engine.Run.StepWith's last word).
	ServerStamp = "server.stamp"
)

// With returns ctx carrying f, which At calls with each point reached.
func With(ctx context.Context, f func(point string)) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// At calls the function ctx carries, if any, with point.
func At(ctx context.Context, point string) {
	if f, ok := ctx.Value(key{}).(func(string)); ok {
		f(point)
	}
}
