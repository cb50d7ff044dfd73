#!/bin/sh
# As the official image's entrypoint: redis-server runs as redis, owning /data, and answers
# other containers (no configuration file: protected mode would refuse them).
set -eu
if [ "$1" = redis-server ]; then
    if [ "$(id -u)" = 0 ]; then
        chown -R redis:redis /data
        exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
    fi
    shift
    exec redis-server --protected-mode no "$@"
fi
exec "$@"
