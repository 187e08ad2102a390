#!/bin/sh
# topo_hosts.sh BURSTSIM — `burstsim topo --help` and the XML it prints agree on the host
# names the simulator places ranks on: gpu<r> for the generated clusters, cpu for host.
bs=$1
fail() { echo "topo_hosts: $*"; exit 1; }
help=$("$bs" topo --help) || fail "topo --help exited $?"
echo "$help" | grep -q "Rank r runs on host gpu<r>" || fail "help does not name hosts gpu<r>"
echo "$help" | grep -q "one host, cpu, runs every rank" || fail "help does not name the host topology's host cpu"
xml=$("$bs" topo host) || fail "topo host exited $?"
echo "$xml" | grep -q '<host id="cpu"' || fail "topo host prints no host cpu"
[ "$(echo "$xml" | grep -c '<host ')" -eq 1 ] || fail "topo host prints more than one host"
echo "$xml" | grep -q "Every rank runs on host cpu" || fail "the XML comment of topo host does not name host cpu"
echo "$xml" | grep -q "gpu<r>" && fail "the XML comment of topo host names hosts gpu<r>"
xml=$("$bs" topo dgx-a100 --nodes 2) || fail "topo dgx-a100 exited $?"
[ "$(echo "$xml" | grep -c '<host id="gpu[0-9]*"')" -eq 16 ] || fail "topo dgx-a100 --nodes 2 lacks hosts gpu0..gpu15"
echo "$xml" | grep -q '<host id="gpu15"' || fail "no host gpu15"
echo "$xml" | grep -q "Rank r runs on host gpu<r>" || fail "the XML comment of dgx-a100 does not name hosts gpu<r>"
echo "topo_hosts: help and XML agree"
