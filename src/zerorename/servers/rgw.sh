#!/bin/bash
# zerorename test launcher: a throwaway single-node Ceph RADOS Gateway (S3) on 127.0.0.1.
#
#   rgw.sh start     start 1 mon + 1 OSD (no mgr, auth none) + radosgw; print endpoint/credentials
#   rgw.sh stop      stop the daemons of $BASE by their saved pids (add --wipe to delete $BASE)
#   rgw.sh status    exit 0 when the gateway of $BASE answers HTTP
#
# Needs the Debian packages: ceph-mon ceph-osd radosgw ceph-common (no systemd, nothing in /etc).
# Everything lives in $BASE, so several instances can run at once with distinct BASE and ports.
#
# Environment (defaults in brackets):
#   BASE        state, logs, pid files [${TMPDIR:-/tmp}/zerorename-rgw]
#   RGW_PORT    S3 port [7480]     MON_PORT  mon msgr v1 port [6789]     MON2_PORT  mon msgr v2 port [3300]
#   RGW_SSL_PORT  also serve HTTPS on this port (beast ssl_endpoint) [unset: HTTP only]; needs
#               RGW_SSL_CERT (PEM: certificate, then its chain) and RGW_SSL_KEY (PEM private key)
#   STORE       memstore (RAM, fastest start) | bluestore (sparse file $BASE/osd.0.block) [memstore]
#   OSD_SIZE    memstore capacity / bluestore file size [4G / 20G]
#   AK, SK      S3 access key / secret key of the created user
#   START_TIMEOUT  seconds to wait for each step [60]
#   CEPH_EXTRA_CONF  extra ceph.conf text appended at the end (e.g. "[client.rgw]\nrgw ... = ...")
#   OWNER_PID   when set, a watchdog stops the daemons and wipes $BASE once that process is gone
#               (the daemons detach, so a killed test run would otherwise leave them running)
#
# On success `start` writes $BASE/env (shell exports) and $BASE/s3.json, and prints both.
# On failure it prints the tail of the logs, stops what it started and exits non-zero.
set -euo pipefail

BASE=${BASE:-${TMPDIR:-/tmp}/zerorename-rgw}
PORT=${RGW_PORT:-7480}
MON_PORT=${MON_PORT:-6789}
MON2_PORT=${MON2_PORT:-3300}
SSL_PORT=${RGW_SSL_PORT:-}
SSL_CERT=${RGW_SSL_CERT:-}
SSL_KEY=${RGW_SSL_KEY:-}
STORE=${STORE:-memstore}
if [ "$STORE" = memstore ]; then SIZE=${OSD_SIZE:-4G}; else SIZE=${OSD_SIZE:-20G}; fi
AK=${AK:-ZRTESTACCESSKEY00001}
SK=${SK:-zrtestsecretkey0000000000000000000000001}
START_TIMEOUT=${START_TIMEOUT:-60}
CONF=$BASE/ceph.conf

log() { echo "rgw.sh: $*" >&2; }

pids_of() {
    # every pid this BASE knows about: saved list plus the daemons' own pid files
    { cat "$BASE/pids" 2>/dev/null || true; cat "$BASE"/run/*.pid 2>/dev/null || true; } |
        tr -s ' \n' '\n' | grep -E '^[0-9]+$' | sort -u || true
}

do_stop() {
    local pids p alive wd
    wd=$(cat "$BASE/watchdog.pid" 2>/dev/null || true)
    if [ -n "$wd" ] && [ "$wd" != "${WATCHDOG_SELF:-}" ]; then kill "$wd" 2>/dev/null || true; fi
    rm -f "$BASE/watchdog.pid"
    pids=$(pids_of)
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    # give them 2 s to exit cleanly, then KILL: the data is throwaway (start always wipes BASE)
    for _ in $(seq 20); do
        alive=
        for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for p in $pids; do
        if kill -0 "$p" 2>/dev/null; then kill -9 "$p" 2>/dev/null || true; fi
    done
    for _ in $(seq 20); do
        alive=
        for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.05
    done
    rm -f "$BASE/pids" "$BASE"/run/*.pid 2>/dev/null || true
}

show_logs() {
    # the gateway's log last: it is the one that usually says why
    local f
    for f in "$BASE/log/setup.log" "$BASE/log/mon.a.log" "$BASE/log/osd.0.log" \
        "$BASE/log/radosgw-admin.log" "$BASE/log/client.rgw.log"; do
        [ -s "$f" ] || continue
        echo "----- tail -n 20 $f" >&2
        tail -n 20 "$f" >&2
    done
}

fail() {
    log "FAILED: $*"
    show_logs
    do_stop
    log "FAILED: $* (state and logs kept in $BASE/log)"
    exit 1
}

http_ok() (
    # 0 when the gateway answers HTTP 200 on /; plain bash (a subshell), no curl needed
    exec 2>/dev/null
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
    printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    IFS= read -r -t 5 line <&3 || exit 1
    [[ $line == HTTP/1.?\ 200* ]]
)

port_busy() ( exec 2>/dev/null; exec 3<>"/dev/tcp/127.0.0.1/$1" )

ceph_cmd() { timeout "$START_TIMEOUT" ceph -c "$CONF" --connect-timeout "$START_TIMEOUT" "$@"; }

do_start() {
    local b
    for b in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool; do
        command -v "$b" >/dev/null || {
            log "$b not found; install: apt-get install -y --no-install-recommends" \
                "ceph-mon ceph-osd radosgw ceph-common"
            exit 2
        }
    done
    if [ -n "$(pids_of)" ]; then
        log "$BASE has running daemons (pids: $(pids_of | tr '\n' ' ')); run: BASE=$BASE $0 stop"
        exit 1
    fi
    local frontend="beast endpoint=127.0.0.1:$PORT tcp_nodelay=1"
    if [ -n "$SSL_PORT" ]; then
        if [ ! -r "$SSL_CERT" ] || [ ! -r "$SSL_KEY" ]; then
            log "RGW_SSL_PORT=$SSL_PORT needs readable RGW_SSL_CERT and RGW_SSL_KEY files" \
                "(got '${SSL_CERT}' and '${SSL_KEY}')"
            exit 2
        fi
        frontend="$frontend ssl_endpoint=127.0.0.1:$SSL_PORT ssl_certificate=$SSL_CERT ssl_private_key=$SSL_KEY"
    fi
    for b in "$PORT" "$MON_PORT" "$MON2_PORT" $SSL_PORT; do
        if port_busy "$b"; then
            log "port $b on 127.0.0.1 is already in use (RGW_PORT=$PORT MON_PORT=$MON_PORT MON2_PORT=$MON2_PORT RGW_SSL_PORT=$SSL_PORT)"
            exit 1
        fi
    done
    local t0 fsid osd_uuid monaddr bytes osd_id
    t0=$(date +%s.%N)
    rm -rf "$BASE"
    mkdir -p "$BASE"/{run,log,mon.a,osd.0,rgw}
    bytes=$(numfmt --from=iec "$SIZE")
    # memstore's used-bytes counter can go below zero (seen on Ceph pacific after a long test
    # run: stat_bytes_used 2^64 - 2 MB); its statfs then says the OSD is ~1e9 times full, the
    # failsafe drops every write and RGW stops answering. memstore is RAM, bounded by the
    # machine, so its full checks are turned off (ratios above 1 are read as percent: 1e12 ->
    # 1e10, above the largest ratio a wrapped counter gives, 2^64 / device bytes).
    full_checks=""
    if [ "$STORE" = memstore ]; then
        full_checks="osd failsafe full ratio = 1e12
mon osd full ratio = 1e12
mon osd backfillfull ratio = 1e12
mon osd nearfull ratio = 1e12"
    fi
    fsid=$(cat /proc/sys/kernel/random/uuid)
    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    monaddr="[v2:127.0.0.1:$MON2_PORT,v1:127.0.0.1:$MON_PORT]"
    cat >"$CONF" <<CONF
[global]
fsid = $fsid
mon host = $monaddr
public addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
keyring = $BASE/keyring
run dir = $BASE/run
admin socket = $BASE/run/\$name.asok
pid file = $BASE/run/\$name.pid
log file = $BASE/log/\$name.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
$full_checks
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 1
mon data avail crit = 0
mon max pg per osd = 1000
# commit mon map changes fast (pool creation otherwise costs ~2 s each)
paxos propose interval = 0.05
paxos min wait = 0.01
[mon]
mon data = $BASE/\$name
mon cluster log file = $BASE/log/cluster.log
[osd]
osd data = $BASE/\$name
osd objectstore = $STORE
memstore device bytes = $bytes
bluestore block path = $BASE/\$name.block
bluestore block create = true
bluestore block size = $bytes
osd memory target = 1073741824
[client]
# one socket per CLI process: the pool commands run in parallel
admin socket = $BASE/run/\$name.\$pid.asok
# radosgw and the ceph CLI default to ms_mon_client_mode=secure, which cannot work with auth none
ms mon client mode = crc
[client.rgw]
admin socket = $BASE/run/\$name.asok
# tcp_nodelay: without it a small response on a reused connection waits ~40 ms for the
# client's delayed ACK (Nagle), so small GET/LIST/HEAD take 45-50 ms instead of ~4 ms
rgw frontends = $frontend
rgw data = $BASE/rgw
# reclaim deleted/overwritten multipart data quickly (matters for memstore capacity)
rgw gc obj min wait = 30
rgw gc processor period = 30
CONF
    if [ -n "${CEPH_EXTRA_CONF:-}" ]; then printf '%b\n' "$CEPH_EXTRA_CONF" >>"$CONF"; fi
    touch "$BASE/keyring"

    # --- mon
    monmaptool --create --fsid "$fsid" --addv a "$monaddr" "$BASE/monmap" >/dev/null 2>>"$BASE/log/setup.log" ||
        fail "monmaptool"
    ceph-authtool --create-keyring "$BASE/mon.keyring" --gen-key -n mon. --cap mon 'allow *' \
        >/dev/null 2>>"$BASE/log/setup.log" || fail "ceph-authtool"
    ceph-mon -c "$CONF" --mkfs -i a --monmap "$BASE/monmap" --keyring "$BASE/mon.keyring" \
        >>"$BASE/log/setup.log" 2>&1 || fail "ceph-mon --mkfs"
    ceph-mon -c "$CONF" -i a >>"$BASE/log/setup.log" 2>&1 || fail "ceph-mon did not start (ports $MON_PORT/$MON2_PORT in use?)"

    # --- osd
    osd_id=$(ceph_cmd osd new "$osd_uuid" 2>>"$BASE/log/setup.log") ||
        fail "the mon did not answer 'ceph osd new' (ports $MON_PORT/$MON2_PORT in use?)"
    ceph-osd -c "$CONF" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" >>"$BASE/log/setup.log" 2>&1 ||
        fail "ceph-osd --mkfs"
    ceph-osd -c "$CONF" -i "$osd_id" >>"$BASE/log/setup.log" 2>&1 || fail "ceph-osd did not start"

    # --- pools up front (radosgw would otherwise create them one by one, lazily); in parallel
    local p jobs=()
    for p in .rgw.root default.rgw.{log,control,meta,buckets.index,buckets.non-ec,buckets.data}; do
        { ceph_cmd osd pool create "$p" 8 8 && ceph_cmd osd pool application enable "$p" rgw; } \
            >/dev/null 2>>"$BASE/log/setup.log" &
        jobs+=($!)
    done
    for p in "${jobs[@]}"; do wait "$p" || fail "ceph osd pool create"; done

    # --- rgw
    radosgw -c "$CONF" -n client.rgw >>"$BASE/log/setup.log" 2>&1 || fail "radosgw did not start"
    local deadline
    deadline=$(($(date +%s) + START_TIMEOUT))
    until http_ok; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            fail "radosgw did not answer on 127.0.0.1:$PORT within ${START_TIMEOUT}s (port in use?)"
        fi
        if [ -s "$BASE/run/client.rgw.pid" ] && ! kill -0 "$(cat "$BASE/run/client.rgw.pid")" 2>/dev/null; then
            fail "radosgw exited"
        fi
        sleep 0.1
    done
    if ! kill -0 "$(cat "$BASE/run/client.rgw.pid" 2>/dev/null || echo 0)" 2>/dev/null; then
        fail "radosgw is not running although 127.0.0.1:$PORT answers (port taken by another process?)"
    fi
    if [ -n "$SSL_PORT" ] && ! port_busy "$SSL_PORT"; then
        fail "radosgw does not listen on its HTTPS port 127.0.0.1:$SSL_PORT (certificate or key rejected?)"
    fi
    timeout "$START_TIMEOUT" radosgw-admin -c "$CONF" user create --uid=test --display-name=test \
        --access-key="$AK" --secret-key="$SK" >"$BASE/user.json" 2>>"$BASE/log/radosgw-admin.log" ||
        fail "radosgw-admin user create"
    cat "$BASE"/run/*.pid | tr -s ' \n' '\n' >"$BASE/pids"
    if [ -n "${OWNER_PID:-}" ]; then
        # detached watchdog (own session, no inherited stdio): stop + wipe when the owner dies
        setsid bash "$0" watch "$OWNER_PID" </dev/null >>"$BASE/log/watchdog.log" 2>&1 &
        echo $! >"$BASE/watchdog.pid"
    fi

    cat >"$BASE/env" <<ENV
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=$AK
export AWS_SECRET_ACCESS_KEY=$SK
export AWS_DEFAULT_REGION=us-east-1
ENV
    local https_json=""
    if [ -n "$SSL_PORT" ]; then https_json=", \"https_endpoint_url\": \"https://127.0.0.1:$SSL_PORT\""; fi
    cat >"$BASE/s3.json" <<JSON
{"endpoint_url": "http://127.0.0.1:$PORT"$https_json, "region": "us-east-1", "access_key": "$AK", "secret_key": "$SK", "addressing_style": "path", "base": "$BASE"}
JSON
    local secs
    secs=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")
    echo "ceph $(ceph-mon --version | awk '{print $3}') radosgw up in ${secs}s (store=$STORE, base=$BASE, pids: $(tr '\n' ' ' <"$BASE/pids"))"
    echo "endpoint:   http://127.0.0.1:$PORT   (path-style; region us-east-1)"
    if [ -n "$SSL_PORT" ]; then echo "https:      https://127.0.0.1:$SSL_PORT   (CA: the issuer of $SSL_CERT)"; fi
    echo "access key: $AK"
    echo "secret key: $SK"
    echo "env file:   $BASE/env   json: $BASE/s3.json"
}

case "${1:-}" in
start) do_start ;;
stop)
    do_stop
    if [ "${2:-}" = "--wipe" ]; then rm -rf "$BASE"; fi
    ;;
watch)
    owner=${2:?usage: $0 watch OWNER_PID}
    export WATCHDOG_SELF=$$
    while kill -0 "$owner" 2>/dev/null && [ -e "$BASE/pids" ]; do sleep 1; done
    if [ -e "$BASE/pids" ]; then
        log "owner $owner is gone: stopping the daemons of $BASE and wiping it"
        do_stop
        rm -rf "$BASE"
    fi
    ;;
status)
    if http_ok; then echo "radosgw answers on 127.0.0.1:$PORT"; else
        echo "radosgw does not answer on 127.0.0.1:$PORT" >&2
        exit 1
    fi
    ;;
*)
    echo "usage: [BASE=dir RGW_PORT=n MON_PORT=n MON2_PORT=n STORE=memstore|bluestore] $0 start|stop [--wipe]|status" >&2
    exit 2
    ;;
esac
