//go:build tools

// Package tools pins Flux's source-controller for bench_flux (scripts/setup --with-flux builds it).
package tools

import _ "github.com/fluxcd/source-controller"
