#!/bin/bash
for r in 1 2 3; do for m in read ring ring-defer; do /tmp/wakebench/target/release/wakebench $m 5000; done; done
