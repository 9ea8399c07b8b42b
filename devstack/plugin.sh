#!/bin/bash
# os-brick-cas devstack plugin: Open CAS caches on the compute host, the
# package in nova's and cinder's environment, their configuration, the
# cache-mode volume types and the tempest options.

# shellcheck source=devstack/lib/os-brick-cas
source "$OS_BRICK_CAS_DIR/devstack/lib/os-brick-cas"

if [[ "$1" == "stack" && "$2" == "pre-install" ]]; then
    echo_summary "os-brick-cas: Open CAS"
    install_open_cas
elif [[ "$1" == "stack" && "$2" == "install" ]]; then
    echo_summary "os-brick-cas: installing the package"
    install_os_brick_cas
elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    echo_summary "os-brick-cas: cache instances and configuration"
    start_cache_instances
    configure_nova_os_brick_cas
    configure_cinder_os_brick_cas
elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    echo_summary "os-brick-cas: volume types"
    create_cache_volume_types
elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
    configure_tempest_os_brick_cas
fi

if [[ "$1" == "unstack" ]]; then
    stop_cache_instances
fi

if [[ "$1" == "clean" ]]; then
    cleanup_os_brick_cas
fi
