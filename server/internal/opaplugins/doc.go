// Package opaplugins is the sidecar's glue to OPA's management plane (its
// plugin manager and the bundle, decision-log, status and discovery
// plugins), apart from the sidecar's own request logic:
//
//   - config.go: the checks of an OPA configuration (CheckConfig, and
//     DiscoveredConfig for one a discovery bundle delivers): an option
//     OPA would ignore, or that policycheck does not act on, is refused;
//     and the decision-log buffer bound (BoundDecisionLogs);
//   - logger.go: slog as OPA's logging.Logger (NewLogger);
//   - bundles.go: Bundles, which follows the bundle plugin (bundles
//     configured, activations taken in or refused, bundle servers that
//     have stopped answering) for GET /health and readiness;
//   - store.go: the plugin manager's store: the shipped policies seeded
//     into it, and the policies and data a bundle activated read out of
//     it as engine options;
//   - sink.go: Sink, the decision-log sink's state (uploads, drops
//     counted by event) for GET /health and /metrics.
//
// The sidecar (server/) creates the plugin manager, swaps its policy
// state when a bundle activates, and reports what this package follows;
// the types of its /health document that live here (BundleHealth,
// DecisionLogHealth) are aliased in server's API.
package opaplugins
