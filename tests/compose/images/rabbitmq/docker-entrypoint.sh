#!/bin/sh
# As the official image's entrypoint: the node runs as rabbitmq, and RABBITMQ_DEFAULT_USER,
# RABBITMQ_DEFAULT_PASS and RABBITMQ_DEFAULT_VHOST make the first user (an administrator)
# and virtual host when the node starts on an empty data folder.
set -eu
if [ "$1" = rabbitmq-server ]; then
    if [ "$(id -u)" = 0 ]; then
        defaults=/etc/rabbitmq/conf.d/10-defaults.conf
        : > "$defaults"
        [ -n "${RABBITMQ_DEFAULT_USER:-}" ] && echo "default_user = $RABBITMQ_DEFAULT_USER" >> "$defaults"
        [ -n "${RABBITMQ_DEFAULT_PASS:-}" ] && echo "default_pass = $RABBITMQ_DEFAULT_PASS" >> "$defaults"
        [ -n "${RABBITMQ_DEFAULT_VHOST:-}" ] && echo "default_vhost = $RABBITMQ_DEFAULT_VHOST" >> "$defaults"
        echo "default_user_tags.administrator = true" >> "$defaults"
        chown rabbitmq:rabbitmq "$defaults" && chmod 600 "$defaults"
        chown -R rabbitmq:rabbitmq /var/lib/rabbitmq
        exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups "$0" "$@"
    fi
    shift
    exec /usr/lib/rabbitmq/bin/rabbitmq-server "$@"
fi
exec "$@"
