#!/bin/sh
# test/slurm/run.sh BUILD — the SPANK plugin (BUILD/spank_gmp.so) in a real
# single-node Slurm, stood up here: munged on a private socket, slurmctld
# and slurmd in the foreground, with their own ports, state and spool under
# a scratch directory and cgroup memory enforcement, stopped by their pids
# at the end.  Then what a user types: `srun --gmp --mem=100M` of a Python
# that grows until the cgroup's OOM killer ends it (one bundle, for the
# Python task, "killed by the kernel's OOM killer" with the cgroup's count,
# none for srun), the same as a second user (the bundle is that user's),
# two tasks (one bundle each), `#SBATCH --gmp` (the task's bundle, not the
# batch shell's), a `kill -9` and a `scancel` (a kill, not an OOM), a step
# that asks nothing (no preload) and `srun --gmp true` (nothing left: no
# bundle, no ring).  Skipped, with a line, where Slurm, root or a memory
# cgroup is missing.
set -u
build=$(cd "$1" && pwd)
plugin=$build/spank_gmp.so
failed=0
ok() { echo "ok    slurm: $1"; }
fail() {
    echo "FAIL  slurm: $1"
    failed=1
}
skip() {
    echo "SKIP  slurm: $1"
    exit 0
}
[ "$(id -u)" = 0 ] || skip "not root: slurmd runs tasks as their users"
for p in srun sbatch sinfo squeue scancel slurmctld slurmd munged; do
    command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] || skip "$p is not installed (slurm-wlm, munge)"
done
[ -f "$plugin" ] || skip "$plugin was not built (libslurm-dev's slurm/spank.h is missing)"
if [ -d /sys/fs/cgroup/memory ]; then
    cgroup_plugin=cgroup/v1
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    cgroup_plugin=cgroup/v2
else
    skip "no memory cgroup controller to enforce --mem"
fi
python=/usr/bin/python3 # the second user cannot reach a pyenv under /root

work=$(mktemp -d /tmp/gmp-slurm-XXXXXX)
chmod 0755 "$work"
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$p" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT

# munged on a socket of our own, with the machine's key or one made here
mkdir -p "$work/munge"
key=/etc/munge/munge.key
if [ ! -r "$key" ]; then
    key=$work/munge/munge.key
    dd if=/dev/urandom of="$key" bs=1024 count=1 2>/dev/null
fi
cp "$key" "$work/munge/key"
chown -R munge:munge "$work/munge" && chmod 0700 "$work/munge" && chmod 0400 "$work/munge/key"
chmod 0755 "$work/munge"
socket=$work/munge/munge.socket
runuser -u munge -- /usr/sbin/munged -F --socket="$socket" --key-file="$work/munge/key" \
    --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
    --seed-file="$work/munge/seed" >"$work/munged.out" 2>&1 &
pids="$!"

host=$(hostname -s)
port=$((20000 + $$ % 20000))
mkdir -p "$work/state" "$work/spool" "$work/log"
cat >"$work/slurm.conf" <<EOF
ClusterName=gmptest
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
PlugStackConfig=$work/plugstack.conf
ReturnToService=2
MpiDefault=none
KillWait=2
UnkillableStepTimeout=20
NodeName=$host CPUs=$(nproc) RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
printf 'CgroupPlugin=%s\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n' "$cgroup_plugin" \
    >"$work/cgroup.conf"
echo "optional $plugin" >"$work/plugstack.conf"
export SLURM_CONF=$work/slurm.conf
i=0
until munge -n --socket="$socket" 2>/dev/null | unmunge --socket="$socket" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 50 ] || { cat "$work/munged.out"; fail "munged did not start"; exit 1; }
    sleep 0.1
done
slurmctld -D -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 &
pids="$! $pids"
slurmd -D -f "$SLURM_CONF" >"$work/slurmd.out" 2>&1 &
pids="$! $pids"
i=0
until [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; do
    i=$((i + 1))
    if [ $i -ge 300 ]; then
        tail -5 "$work/log/slurmctld.log" "$work/log/slurmd.log" "$work/slurmd.out"
        fail "the single-node Slurm did not come up"
        exit 1
    fi
    sleep 0.1
done
ok "a single-node Slurm ($cgroup_plugin memory enforcement) up in $((i / 10)) s"

grow='import time
kept = []
while True:
    kept.append(bytearray(4 << 20))
    time.sleep(0.005)'
printf '%s\n' "$grow" >"$work/grow.py"
chmod 0644 "$work/grow.py"
inspect=$build/gmp-inspect

# DIR's bundles: exactly WANT, each killed by the OOM killer with the
# cgroup's count as evidence, each a Python task's
oom_bundles() { # NAME DIR WANT
    n=$(ls -d "$2"/oom_dump_* 2>/dev/null | wc -l)
    if [ "$n" != "$3" ]; then
        fail "$1: $n bundle(s), $3 expected: $(ls "$2" 2>&1)"
        return 1
    fi
    for b in "$2"/oom_dump_*; do
        "$inspect" show "$b" >"$work/show.out" 2>&1
        if ! grep -q "^What happened:    the process was killed by the kernel's OOM killer" "$work/show.out" ||
            ! grep -q "oom_kill in /sys/fs/cgroup/.*rose from 0 to 1" "$work/show.out" ||
            ! grep -q "^Process: .*python3 [^ ]*grow.py" "$work/show.out"; then
            fail "$1: $(basename "$b") is not the Python task's OOM kill: $(head -12 "$work/show.out")"
            return 1
        fi
    done
    return 0
}

# triage's JSON of DIR (in $work/triage.json, its exit status in
# triage_rc): true when the Python expression EXPR holds of it, as t (and
# ARG as arg)
triage_holds() { # DIR EXPR [ARG]
    "$inspect" triage "$1" --format json >"$work/triage.json" 2>/dev/null
    triage_rc=$?
    "$python" -c 'import json, sys
t, arg = json.load(open(sys.argv[1])), sys.argv[3]
sys.exit(not eval(sys.argv[2]))' "$work/triage.json" "$2" "${3:-}" 2>/dev/null
}

cd "$work" || exit 1
srun --gmp="$work/d1" --mem=100M "$python" grow.py >"$work/a.out" 2>&1
rc=$?
[ $rc != 0 ] && oom_bundles "srun --gmp --mem=100M" "$work/d1" 1 && [ ! -e "$work/oom_dumps" ] &&
    ok "srun --gmp --mem=100M of a growing Python: one bundle, the task's OOM kill with the cgroup's count; none for srun" ||
    { [ -e "$work/oom_dumps" ] && fail "srun wrote bundles of its own: $(ls "$work/oom_dumps")"; }
# one line in the job's output: how many tasks, what, where
grep -q "^gpumemprof: step [0-9]*\.0: 1 task(s) ran out of memory; the first: killed by the kernel's OOM killer ($work/d1/oom_dump_" "$work/a.out" &&
    ok "srun's step summary in the job's output: 1 task ran out of memory, killed by the OOM killer, its bundle" ||
    fail "no step summary in srun's output: $(cat "$work/a.out")"
# a dump directory that cannot be had (a symlink): the task's bundle goes to
# $HOME/oom_dumps, and the step's summary counts it there
mkdir -p "$work/h" "$work/elsewhere" && chmod 0700 "$work/h" && ln -sfn "$work/elsewhere" "$work/link"
HOME="$work/h" srun --gmp="$work/link" "$python" -c 'bytearray(1 << 50)' >"$work/f.out" 2>&1
grep -q "^gpumemprof: step [0-9]*\.0: 1 task(s) ran out of memory; the first: .* ($work/h/oom_dumps/oom_dump_.*triage $work/h/oom_dumps\` for all" "$work/f.out" &&
    grep -q "; bundles go to $work/h/oom_dumps instead" "$work/f.out" && [ -z "$(ls "$work/elsewhere")" ] &&
    ok "a dump directory that cannot be had: the bundle in \$HOME/oom_dumps, said by the task and counted by the step's summary" ||
    fail "the fallback dump directory under srun: $(cat "$work/f.out"; ls "$work/elsewhere")"
# the same for a task the OOM killer ended: recover, as the user, writes it
# in the task's $HOME/oom_dumps (not the password file's home)
mkdir -p "$work/h2" && chmod 0700 "$work/h2"
HOME="$work/h2" srun --gmp="$work/link" --mem=100M "$python" grow.py >/dev/null 2>&1
oom_bundles "a killed task whose dump directory cannot be had" "$work/h2/oom_dumps" 1 &&
    [ -z "$(ls "$work/elsewhere")" ] &&
    ok "a killed task whose dump directory cannot be had: its bundle in the task's \$HOME/oom_dumps" ||
    fail "a killed task's fallback: $(ls "$work/h2" "$work/elsewhere" 2>&1)"
# the limit is the job's or step's (Slurm sets none on the task's cgroup)
"$inspect" show "$work"/d1/oom_dump_* >"$work/show1.out" 2>&1
grep -q "^Host: .*cgroup .* of 100.0 MiB limit (set on /sys/fs/cgroup/.*/job_[0-9]*" "$work/show1.out" &&
    ok "the limit that bound the task is the job's or step's cgroup's, named" ||
    fail "the bundle does not name the job's limit: $(grep '^Host:' "$work/show1.out")"

# a second user: the bundle is written as that user, in that user's directory
id gmpslurm >/dev/null 2>&1 || useradd -M -s /bin/sh gmpslurm >/dev/null 2>&1
if id gmpslurm >/dev/null 2>&1; then
    mkdir -p "$work/u" && chown gmpslurm "$work/u"
    (cd "$work/u" && runuser -u gmpslurm -- env SLURM_CONF="$SLURM_CONF" \
        srun --gmp --mem=100M "$python" "$work/grow.py" >/dev/null 2>&1)
    owner=$(stat -c %U "$work"/u/oom_dumps/oom_dump_* 2>/dev/null)
    oom_bundles "a second user" "$work/u/oom_dumps" 1 && [ "$owner" = gmpslurm ] &&
        ok "as a second user: its task's bundle, in its directory, owned by it (never written as root)" ||
        fail "as a second user: the bundle's owner is '$owner'"
else
    echo "SKIP  slurm: no second user could be made (useradd)"
fi

srun --gmp="$work/d2" -n2 --mem=200M "$python" grow.py >/dev/null 2>&1
oom_bundles "srun --gmp -n2" "$work/d2" 2 && ok "srun --gmp -n2: one bundle per task"
# each names its job, step, task and node (from its ring: it was killed),
# and triage groups the job's bundles with it
tasks=$(for b in "$work"/d2/oom_dump_*; do "$inspect" show "$b" | sed -n 's/^Slurm: *job \([0-9]*\), step 0, task \([01]\) on node .*/\1 \2/p'; done | sort)
job=$(printf '%s\n' "$tasks" | head -1 | cut -d' ' -f1)
if triage_holds "$work/d2" 't["groups"][0]["slurm_jobs"] == [arg + ".0"]' "$job" &&
    [ -n "$job" ] && [ "$(printf '%s\n' "$tasks" | tr '\n' ' ')" = "$job 0 $job 1 " ] &&
    ls "$work"/d2 | grep -q "_r0_" && ls "$work"/d2 | grep -q "_r1_"; then
    ok "each bundle names its Slurm job, step, task (its rank in the name) and node; triage groups them by job"
else
    fail "Slurm ids: tasks '$tasks', bundles $(ls "$work/d2"), triage $(cat "$work/triage.json")"
fi

cat >"$work/job.sh" <<EOF
#!/bin/sh
#SBATCH --gmp=$work/d3
#SBATCH --mem=100M
srun "$python" "$work/grow.py"
exit 0
EOF
sbatch --wait -o "$work/job.out" "$work/job.sh" >"$work/sbatch.out" 2>&1
oom_bundles "#SBATCH --gmp" "$work/d3" 1 && grep -q "^gpumemprof: step [0-9]*\.0: 1 task(s) ran out of memory" "$work/job.out" &&
    ok "#SBATCH --gmp: the step's task has its bundle (the batch shell and srun none), and the job's output says so" ||
    echo "      sbatch: $(cat "$work/sbatch.out"); the job: $(cat "$work/job.out")"

# a batch script that runs python itself, as most do (no srun): the
# script's own processes have the preload, the python the cgroup's OOM
# killer ends gets its bundle with root's verdict, and the job's output its
# line; an srun the script starts loads no preload (its task has it, asked)
cat >"$work/job2.sh" <<EOF
#!/bin/sh
#SBATCH --gmp=$work/d8
#SBATCH --mem=100M
srun sleep 2 &
srun_pid=\$!
sleep 1
echo "srun maps: \$(grep -c gpumemprof_preload /proc/\$srun_pid/maps)"
wait \$srun_pid
"$python" "$work/grow.py"
echo "the script goes on"
EOF
sbatch --wait -o "$work/job2.out" "$work/job2.sh" >"$work/sbatch2.out" 2>&1
if oom_bundles "a batch script's own python" "$work/d8" 1 &&
    grep -q "^gpumemprof: pid [0-9]* was killed by the kernel's OOM killer; bundle: $work/d8/oom_dump_" "$work/job2.out" &&
    grep -q "^srun maps: 0$" "$work/job2.out" && grep -q "^the script goes on" "$work/job2.out"; then
    ok "#SBATCH --gmp, python in the script itself: its OOM kill has a bundle and a line in the job's output; srun loads no preload"
else
    fail "#SBATCH --gmp without srun: $(ls "$work/d8" 2>&1); the job: $(cat "$work/job2.out")"
fi

# the preload in the user's own shell (srun inherits it, and passes it on
# to the task): srun relays the task's fate ("task 0: Out Of Memory"), which
# is no OOM of srun's own
(LD_PRELOAD=$build/libgpumemprof_preload.so GMP_DUMP_DIR=$work/d6 srun --gmp="$work/d6" --mem=100M \
    "$python" grow.py >/dev/null 2>&1)
n=$(ls -d "$work"/d6/oom_dump_* 2>/dev/null | wc -l)
srun_said=$(for b in "$work"/d6/oom_dump_*; do "$inspect" show "$b" 2>&1 | grep "^Process:"; done | grep -c "srun")
[ "$n" = 1 ] && [ "$srun_said" = 0 ] && oom_bundles "LD_PRELOAD then srun --gmp" "$work/d6" 1 &&
    ok "the preload in the user's shell too: srun writes no bundle of its own; the task's is the one" ||
    fail "LD_PRELOAD before srun: $n bundle(s), $srun_said of srun: $(ls "$work/d6")"

# slow pressure under the step's limit (the task's cgroup has none of its
# own): the watchdog's warning, and no death
srun --gmp="$work/d5" --mem=600M "$python" -c 'import time
kept = []
for step in range(70):
    kept.append(bytearray(8 << 20))
    time.sleep(0.02)
time.sleep(1.5)' >/dev/null 2>&1
rc=$?
if triage_holds "$work/d5" 't["pressure_warnings"] == 1 and t["oom_bundles"] == 0' && [ $rc = 0 ]; then
    ok "a task nearing the step's limit: one memory-pressure warning, no death"
else
    fail "pressure under the step's limit: exit $rc, $(cat "$work/triage.json")"
fi

# a task holding 20 MiB for a minute, its dump directory DIR: srun_pid,
# and task (its pid) and jobid once it runs ("" when it never did)
holder() { # DIR
    srun --gmp="$1" --mem=500M "$python" -c 'import time
x = bytearray(20 << 20)
time.sleep(60)' >/dev/null 2>&1 &
    srun_pid=$!
    task="" jobid=""
    i=0
    until task=$(pgrep -f "^$python -c import time" | head -1) && [ -n "$task" ] &&
        jobid=$(squeue -h -o %i 2>/dev/null | head -1) && [ -n "$jobid" ]; do
        i=$((i + 1))
        [ $i -lt 100 ] || break
        sleep 0.1
    done
    sleep 0.5
}

# a kill -9 that is no OOM: written up as a kill
holder "$work/d4"
[ -n "${task:-}" ] && kill -9 "$task"
wait "$srun_pid" 2>/dev/null
if triage_holds "$work/d4" 't["bundles"] == 1 and t["oom_bundles"] == 0' && [ $triage_rc = 0 ]; then
    ok "a kill -9 of a task: its bundle says killed, and triage passes it (no OOM)"
else
    fail "a kill -9 of a task: triage exit $triage_rc: $(cat "$work/triage.json")"
fi

# scancel of a running job: no OOM either
holder "$work/d7"
rings_before=$(find /tmp/gpumemprof-0 -name 'ring_*' 2>/dev/null | wc -l)
[ -n "${jobid:-}" ] && scancel "$jobid"
wait "$srun_pid" 2>/dev/null
sleep 1 # the step's end: slurmstepd reaps and recovers
rings_after=$(find /tmp/gpumemprof-0 -name 'ring_*' 2>/dev/null | wc -l)
if [ -n "${jobid:-}" ] && [ -z "$(ls -A "$work/d7" 2>/dev/null)" ] &&
    [ "$rings_after" -lt "$rings_before" ]; then
    ok "scancel of a running job (SIGTERM, no death of memory): no bundle, no ring left"
else
    fail "scancel: job '${jobid:-}', rings $rings_before -> $rings_after, bundles: $(ls "$work/d7" 2>&1)"
fi

# a task whose environment names XDG_RUNTIME_DIR keeps its ring there; the
# plugin's recover looks there too (kill -9: a kill, written up)
mkdir -p "$work/xdg" && chmod 0700 "$work/xdg"
XDG_RUNTIME_DIR="$work/xdg" holder "$work/d9"
[ -n "${task:-}" ] && ls "$work/xdg/gpumemprof" | grep -q "ring_${task}_" && kill -9 "$task"
wait "$srun_pid" 2>/dev/null
if triage_holds "$work/d9" 't["bundles"] == 1 and t["oom_bundles"] == 0' &&
    [ -z "$(ls -A "$work/xdg/gpumemprof")" ]; then
    ok "a task with XDG_RUNTIME_DIR: its ring kept there is found, and written up when it is killed"
else
    fail "XDG_RUNTIME_DIR: task '${task:-}', rings there: $(ls "$work/xdg/gpumemprof" 2>&1), $(cat "$work/triage.json")"
fi

# another user plants bundles of the coming steps in a shared directory,
# their names full of terminal escapes: the step's line counts none of them
if id gmpslurm >/dev/null 2>&1; then
    mkdir -p "$work/shared" && chmod 1777 "$work/shared"
    runuser -u gmpslurm -- sh -c '
        for j in $(seq 1 200); do
            b="$1/oom_dump_00000000T000000Z_1_cpu_$(printf "\033[2J\033[31m")$j"
            mkdir "$b" && printf "{\"slurm_job\":\"%s.0\"}" "$j" >"$b/manifest.json" &&
                printf "{\"reason\":\"killed\",\"exception_type\":\"oom_killer\",\"exception_module\":\"kernel\"}" >"$b/metadata.json"
        done' sh "$work/shared"
    said=$(cd "$work" && srun --gmp="$work/shared" true 2>&1 | grep "^gpumemprof")
    planted=$(ls "$work/shared" | wc -l)
    if [ -z "$said" ] && [ "$planted" = 200 ]; then
        ok "bundles another user planted in a shared dump directory: the step's line counts none"
    else
        fail "planted bundles ($planted): srun said $(printf '%s' "$said" | od -c | head -3)"
    fi
fi
# a dump directory whose own name holds an escape: printed escaped
esc="$work/d$(printf '\033')x"
(cd "$work" && srun --gmp="$esc" --mem=100M "$python" grow.py >"$work/esc.out" 2>&1)
if grep -q "^gpumemprof: step [0-9.]*: 1 task(s) ran out of memory.*($work/d\\\\x1bx/oom_dump_" "$work/esc.out" &&
    ! grep -q "$(printf '\033')" "$work/esc.out"; then
    ok "the step's line prints a name's control characters escaped"
else
    fail "escapes in the step's line: $(od -c "$work/esc.out" | head -8)"
fi

# a user who stops their own recover (the plugin's gmp-inspect, here a
# stand-in that stops itself) cannot hold slurmstepd: scancel ends the job
# at once, the node stays up (Slurm drains a node whose step outlives
# UnkillableStepTimeout, 20 s here), and the stopped process is gone with
# the step
printf '#!/bin/sh\necho "$$" >>%s/stopped.pids\nkill -STOP $$\n' "$work" >"$work/stop-recover"
chmod 0755 "$work/stop-recover"
echo "optional $plugin inspect=$work/stop-recover" >"$work/plugstack.conf"
started=$(date +%s)
holder "$work/d10"
[ -n "${jobid:-}" ] && scancel "$jobid"
wait "$srun_pid" 2>/dev/null
i=0
while [ -n "$(squeue -h 2>/dev/null)" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
took=$(($(date +%s) - started))
state=$(sinfo -h -o %T)
stopped=$(cat "$work/stopped.pids" 2>/dev/null)
alive=""
for p in $stopped; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
echo "optional $plugin" >"$work/plugstack.conf"
if [ -n "$stopped" ] && [ -z "$alive" ] && [ "$state" = idle ] && [ -z "$(squeue -h 2>/dev/null)" ] &&
    [ "$took" -le 8 ]; then
    ok "a recover its user stopped: the job ended in ${took} s, the node stayed $state, the stopped recover is gone"
else
    fail "a stopped recover: recovers '$stopped' alive '$alive', node $state, queue $(squeue -h 2>&1), $took s"
    scontrol update nodename="$host" state=resume >/dev/null 2>&1
fi

# a step that does not ask is not touched; one that asks and ends cleanly leaves nothing
seen=$(srun sh -c 'echo "[$LD_PRELOAD]"' 2>&1)
[ "$seen" = "[]" ] && ok "a step without --gmp: no preload in its task" ||
    fail "a step without --gmp saw LD_PRELOAD $seen"
rings_before=$(find /tmp/gpumemprof-0 -type f 2>/dev/null | wc -l)
mkdir -p "$work/clean" && cd "$work/clean" || exit 1
seen=$(srun --gmp sh -c 'echo "$LD_PRELOAD"' 2>&1)
said=$(srun --gmp true 2>&1 | grep "^gpumemprof")
rings_after=$(find /tmp/gpumemprof-0 -type f 2>/dev/null | wc -l)
case "$seen" in
*libgpumemprof_preload.so*)
    [ ! -e "$work/clean/oom_dumps" ] && [ "$rings_after" -le "$rings_before" ] && [ -z "$said" ] &&
        ok "srun --gmp: the preload in the task; srun --gmp true leaves no bundle, no ring, no line" ||
        fail "srun --gmp true left: $(ls "$work/clean") rings $rings_before -> $rings_after, said '$said'" ;;
*) fail "srun --gmp: the task's LD_PRELOAD is '$seen'" ;;
esac
cd "$work" || exit 1
exit $failed
