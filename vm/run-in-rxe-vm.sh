#!/bin/bash
# run-in-rxe-vm.sh CMD [ARGS...]
#
# Boots the host's Debian 6.1 kernel in qemu (TCG) with soft-RoCE configured (rxe0 on a
# dummy netdev, IPv4 10.77.0.1) and runs CMD inside. The guest sees the HOST root
# filesystem read-only (virtio-9p) under a throw-away tmpfs overlay, so host-built
# binaries and host libraries work unchanged; CMD runs as root in the same working
# directory with the same environment (TERM=dumb, stdin=/dev/null), plus COREWIRE_RXE_VM=1
# (for tests that change what only a throw-away guest may, such as device permissions).
# CMD's stdout/stderr stream to this script's stdout/stderr; the exit status is CMD's
# (125 = VM/infrastructure failure, 124 = timeout).
#
# As a cargo runner (each test binary runs in its own VM; tests build on the host):
#   CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=/path/to/run-in-rxe-vm.sh cargo test
#
# Knobs (environment):
#   RXE_VM_SMP=2 RXE_VM_MEM=2048(MiB)    vCPUs / memory (2 vCPUs needed for polling tests)
#   RXE_VM_NETDEV=dummy2|dummy|lo|veth|nic|none
#                                        dummy2 (default): rxe0 on rxe-d0 10.77.0.1 and rxe1 on
#                                        rxe-d1 10.77.1.1; dummy: rxe0 only; nic: rxe0 on a virtio
#                                        NIC (RXE_VM_NIC, RXE_VM_IP), joined to another VM
#   RXE_VM_NIC="socket,udp=H:P,localaddr=H:P"  nic mode: the qemu -netdev of that NIC (no id;
#                                        it gets id=net0); RXE_VM_IP=10.78.0.1, RXE_VM_MAC
#   RXE_VM_MONITOR=PATH                  qemu monitor on the fifos PATH.in/PATH.out (the caller
#                                        makes them): e.g. `set_link net0 off` (vm/two-vm.sh)
#   RXE_VM_PIDFILE=PATH                  qemu writes its pid there (to kill the VM mid-run)
#   RXE_VM_NAME=rxe-vm                   the guest's hostname
#                                        lo: rxe0 on lo (127.0.0.1); veth: see vm/README.md
#   RXE_VM_RW="dir1 dir2"                host dirs mounted read-write at the same path
#                                        (all other writes are discarded when the VM exits)
#   RXE_VM_TIMEOUT=900                   seconds, whole VM
#   RXE_VM_IDLE_POLL=1                   guest idle=poll: wakeups ~100us instead of ~4ms under TCG
#   RXE_VM_TSC=1                         guest clocksource=tsc tsc=reliable (0: the kernel's
#                                        choice, hpet under TCG: every clock_gettime is then a
#                                        syscall that reads an emulated device)
#   RXE_VM_ACCEL=tcg|kvm                 kvm does NOT work on this host (kvm_pvm), see vm/README.md
#   RXE_VM_MEMLOCK=unlimited             ulimit -l in the guest
#   RXE_VM_APPEND="..."                  extra kernel command line (rxevm.verbose = init timings)
#   RXE_VM_KVER / RXE_VM_KERNEL          kernel version / image to boot
#   RXE_VM_CACHE=/tmp/corewire-rxe-vm   where build-initramfs.sh puts initramfs + vmlinux
#   RXE_VM_KEEP=1                        keep the run dir (console.log = guest kernel log)
#   RXE_VM_VERBOSE=1                     print guest console + timings to stderr
set -u
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 125; }

KVER=${RXE_VM_KVER:-$(for d in /lib/modules/*/; do d=${d%/}; d=${d##*/};
   [ -n "$(find /lib/modules/$d -name 'rdma_rxe.ko*' -print -quit 2>/dev/null)" ] && echo "$d"; done | sort -V | tail -1)}
[ -n "$KVER" ] && [ -r "/boot/vmlinuz-$KVER" ] || { echo "rxe-vm: no kernel with rdma_rxe (apt-get install linux-image-amd64)" >&2; exit 125; }
command -v qemu-system-x86_64 >/dev/null || { echo "rxe-vm: apt-get install qemu-system-x86" >&2; exit 125; }
CACHE=${RXE_VM_CACHE:-/tmp/corewire-rxe-vm}
INITRD=$CACHE/initramfs-$KVER.cpio.gz
mkdir -p "$CACHE"
stale() { [ ! -s "$INITRD" ] || [ "$HERE/guest-init.sh" -nt "$INITRD" ] || [ "$HERE/build-initramfs.sh" -nt "$INITRD" ]; }
if stale; then
  # flock: parallel invocations (cargo runner, several test binaries) build it only once
  ( exec 9>"$CACHE/.lock"; flock 9; if stale; then "$HERE/build-initramfs.sh" "$CACHE" "$KVER" 2>"$CACHE/build.log" || exit 1; fi ) \
    || { echo "rxe-vm: $HERE/build-initramfs.sh failed:" >&2; cat "$CACHE/build.log" >&2; exit 125; }
fi
KERNEL=${RXE_VM_KERNEL:-$CACHE/vmlinux-$KVER}
[ -s "$KERNEL" ] || KERNEL=/boot/vmlinuz-$KVER

# One VM at a time per machine: a TCG guest with idle=poll spins its vCPUs, so two at once
# starve each other (and timing-sensitive RDMA tests fail). RXE_VM_NO_LOCK=1 skips the wait
# (for a caller that holds the lock already, e.g. a harness that boots two VMs itself).
if [ "${RXE_VM_NO_LOCK:-0}" != 1 ]; then
  exec 8>"${RXE_VM_LOCK:-/tmp/corewire-rxe-vm.run.lock}"
  flock 8
fi

RUN=$(mktemp -d /tmp/rxe-vm-run.XXXXXX)
chmod 755 "$RUN"
qpid=; cat_out=; cat_err=
cleanup() {
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null
  [ "${RXE_VM_KEEP:-0}" = 1 ] || rm -rf "$RUN"
}
trap cleanup EXIT
trap 'echo "rxe-vm: interrupted" >&2; [ -n "$qpid" ] && kill "$qpid" 2>/dev/null' INT TERM HUP

# ---- what the guest runs ----------------------------------------------------------------
RW_DIRS=""
for p in ${RXE_VM_RW:-}; do p=$(readlink -f "$p") && [ -d "$p" ] && RW_DIRS="$RW_DIRS $p"; done
cat > "$RUN/vm.conf" <<CONF
NETDEV=${RXE_VM_NETDEV:-dummy2}
VM_IP=${RXE_VM_IP:-10.78.0.1}
RW_DIRS="$RW_DIRS"
MEMLOCK=${RXE_VM_MEMLOCK:-unlimited}
HOSTNAME_VM=${RXE_VM_NAME:-rxe-vm}
CONF
{
  echo "# generated by run-in-rxe-vm.sh"
  export -p | grep -Ev '^declare -x (PWD|OLDPWD|SHLVL|_|BASH_ENV|ENV|TERM)(=|$)'
  echo "export TERM=dumb"
  echo "export COREWIRE_RXE_VM=1"   # tests may change what only a throw-away guest may
  printf 'cd -- %q || exit 126\n' "$PWD"
  printf 'exec'; printf ' %q' "$@"; echo
} > "$RUN/cmd.sh"

# ---- qemu ---------------------------------------------------------------------------------
case ${RXE_VM_ACCEL:-tcg} in
  kvm) ACCEL=(-accel kvm -cpu host) ;;
  *)   ACCEL=(-accel tcg,thread=multi -cpu max) ;;
esac
# pci=noacpi: ACPI PCI-IRQ-link setup costs ~2s under TCG (acpi=off is faster still but leaves 1 CPU)
APPEND="console=ttyS0 loglevel=4 panic=-1 oops=panic mitigations=off pci=noacpi"
[ "${RXE_VM_IDLE_POLL:-1}" = 1 ] && APPEND="$APPEND idle=poll"
# Under TCG the guest kernel distrusts the TSC and picks hpet, so clock_gettime leaves the
# vDSO and reads an emulated HPET: code that reads the clock (Instant::now in a run loop)
# pays a syscall per read, which real hardware (TSC in the vDSO) does not, and perftest,
# which reads rdtsc directly, never pays. TCG's TSC follows the host's invariant TSC.
[ "${RXE_VM_TSC:-1}" = 1 ] && APPEND="$APPEND clocksource=tsc tsc=reliable"
APPEND="$APPEND ${RXE_VM_APPEND:-}"
FS=(-fsdev local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap
    -device virtio-9p-pci,fsdev=fsroot,mount_tag=hostroot
    -fsdev local,id=fsctl,path="$RUN",security_model=none
    -device virtio-9p-pci,fsdev=fsctl,mount_tag=ctl)
i=0
for p in $RW_DIRS; do
  FS+=(-fsdev local,id=fsrw$i,path="$p",security_model=none,multidevs=remap
       -device virtio-9p-pci,fsdev=fsrw$i,mount_tag=rw$i)
  i=$((i+1))
done
# nic mode: one virtio NIC on the netdev the caller describes (vm/two-vm.sh joins two VMs by a
# pair of UDP sockets: stateless, so a VM that is killed and booted again rejoins the link).
NET=()
if [ "${RXE_VM_NETDEV:-}" = nic ]; then
  [ -n "${RXE_VM_NIC:-}" ] || { echo "rxe-vm: RXE_VM_NETDEV=nic needs RXE_VM_NIC (a qemu -netdev spec, e.g. socket,udp=127.0.0.1:4001,localaddr=127.0.0.1:4000)" >&2; exit 125; }
  NET=(-netdev "$RXE_VM_NIC,id=net0" -device virtio-net-pci,netdev=net0,mac="${RXE_VM_MAC:-52:54:00:78:00:01}")
fi
[ -n "${RXE_VM_MONITOR:-}" ] && NET+=(-chardev pipe,id=mon,path="$RXE_VM_MONITOR" -mon chardev=mon,mode=readline)
[ -n "${RXE_VM_PIDFILE:-}" ] && NET+=(-pidfile "$RXE_VM_PIDFILE")
# guest hvc0/hvc1 -> qemu pipe chardevs (fifos) -> cat -> our stdout/stderr.
# (chardev file,path=/proc/self/fd/N would reopen the file: separate offset, outputs clobber each other)
mkfifo "$RUN/out.in" "$RUN/out.out" "$RUN/err.in" "$RUN/err.out"
cat "$RUN/out.out" & cat_out=$!
cat "$RUN/err.out" >&2 & cat_err=$!
t0=$(date +%s.%N)
timeout -k 5 "${RXE_VM_TIMEOUT:-900}" qemu-system-x86_64 \
  "${ACCEL[@]}" -smp "${RXE_VM_SMP:-2}" -m "${RXE_VM_MEM:-2048}" \
  -nodefaults -no-user-config -display none -no-reboot \
  -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" \
  -serial file:"$RUN/console.log" \
  "${FS[@]}" "${NET[@]}" \
  -device virtio-serial-pci \
  -chardev pipe,id=out,path="$RUN/out" -device virtconsole,chardev=out \
  -chardev pipe,id=err,path="$RUN/err" -device virtconsole,chardev=err \
  </dev/null >"$RUN/qemu.log" 2>&1 &
qpid=$!
wait "$qpid"; qrc=$?
kill -0 "$qpid" 2>/dev/null && { wait "$qpid"; qrc=$?; }   # wait was interrupted by a trapped signal
qpid=
t1=$(date +%s.%N)
# cat gets EOF once qemu is gone; if qemu never opened a fifo, unblock cat's open()
kill -0 "$cat_out" 2>/dev/null && timeout 2 sh -c ": > '$RUN/out.out'" 2>/dev/null
kill -0 "$cat_err" 2>/dev/null && timeout 2 sh -c ": > '$RUN/err.out'" 2>/dev/null
wait "$cat_out" "$cat_err" 2>/dev/null

if [ -s "$RUN/rc" ]; then
  rc=$(cat "$RUN/rc")
else
  if [ "$qrc" = 124 ]; then echo "rxe-vm: timed out after ${RXE_VM_TIMEOUT:-900}s" >&2; rc=124
  else echo "rxe-vm: guest did not report an exit code (qemu rc=$qrc)" >&2; rc=125; fi
  { echo "--- qemu:"; cat "$RUN/qemu.log"; echo "--- guest console (tail):"; tail -n 40 "$RUN/console.log"; } >&2
fi
if [ "${RXE_VM_VERBOSE:-0}" = 1 ]; then
  { echo "--- guest console:"; cat "$RUN/console.log"
    printf 'rxe-vm: wall %.2fs (qemu start to exit), guest setup done at uptime %ss, rc=%s\n' \
      "$(echo "$t1 - $t0" | bc)" "$(cat "$RUN/guest-setup-uptime" 2>/dev/null)" "$rc"; } >&2
fi
exit "$rc"
