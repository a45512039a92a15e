# Two entry points that do all the set-up on a fresh Debian machine (libcgroup-dev, build).
.PHONY: demo soak test setup install docs bench lint format

demo:   ## the main job: memwarn soak (the demo service with and without memwarn; plot in soak.svg)
	Scripts/demo

soak: demo

test:   ## every test (unit, fixture, real-cgroup integration, CLI)
	Scripts/test

setup:  ## install libcgroup-dev when missing, then build
	Scripts/setup

PREFIX ?= /usr/local
install:  ## the memwarn CLI on the PATH: libcgroup-dev when missing, a release build of memwarn alone, copied to $(PREFIX)/bin
	Scripts/setup --packages
	swift build -c release --product memwarn
	install -m 0755 "$$(swift build -c release --show-bin-path)/memwarn" "$(PREFIX)/bin/memwarn"

lint:   ## the layers (Scripts/check-layers) and swift-format, as make test runs them
	Scripts/lint

format: ## rewrite Sources, Tests and Package.swift as swift-format wants them (.swift-format)
	swift format format --in-place --recursive Sources Tests Package.swift

docs:   ## the DocC documentation of every library (no warnings), in .build-docs/
	Scripts/docs

bench:  ## detection latency, idle CPU and time to armed, peers side by side (growth: Benchmarks/run growth)
	Benchmarks/run latency --crossings 200
	Benchmarks/run idle --seconds 60
	Benchmarks/run armed --runs 20
