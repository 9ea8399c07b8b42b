#!/bin/bash
# shellcheck source-path=SCRIPTDIR
# os-brick-cas devstack plugin.
#
# devstack sources this file as "plugin.sh <mode> [<phase>]" in the order
# the plugins were enabled. What runs where:
#   stack pre-install  check the settings; Open CAS build dependencies
#   stack install      Open CAS (unless casadm exists), the package into
#                      nova's/cinder's environment, check nova loads the
#                      driver (nova-shim check)
#   stack post-config  rootwrap filter, udev rule, cache instances and
#                      opencas.conf, nova.conf (before devstack copies it to
#                      nova-cpu.conf), cinder.conf
#   stack extra        check nova-cpu.conf, create the cas-<mode> types
#   stack test-config  tempest.conf [os_brick_cas_tempest]
#   unstack            shut down guests using cached volumes, then flush and
#                      stop the caches: os-brick-cas host stop (never
#                      dropping dirty data)
#   clean              old shim file, installed files; os-brick-cas host
#                      forget, then the loop files and RAM disks it allows

# shellcheck source=lib/os-brick-cas
source "$(dirname "${BASH_SOURCE[0]}")/lib/os-brick-cas"

if [[ "$1" == "stack" && "$2" == "pre-install" ]]; then
    check_os_brick_cas_settings
    if is_service_enabled n-cpu; then
        echo_summary "os-brick-cas: Open CAS build dependencies"
        install_open_cas_build_deps
    fi

elif [[ "$1" == "stack" && "$2" == "install" ]]; then
    if is_service_enabled n-cpu; then
        echo_summary "os-brick-cas: installing Open CAS"
        install_open_cas
    fi
    if is_service_enabled n-cpu c-vol c-api; then
        echo_summary "os-brick-cas: installing os-brick-cas"
        install_os_brick_cas
    fi

elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    if is_service_enabled n-cpu; then
        echo_summary "os-brick-cas: Open CAS caches and nova"
        configure_os_brick_cas_host
        start_open_cas_caches
        configure_os_brick_cas_nova
    fi
    if is_service_enabled c-vol c-api; then
        echo_summary "os-brick-cas: cinder"
        configure_os_brick_cas_cinder
    fi

elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    if is_service_enabled n-cpu; then
        verify_os_brick_cas_nova_cpu_conf
    fi
    if is_service_enabled c-api; then
        echo_summary "os-brick-cas: cache-mode volume types"
        create_os_brick_cas_volume_types
    fi

elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
    if is_service_enabled tempest; then
        configure_os_brick_cas_tempest
    fi

elif [[ "$1" == "unstack" ]]; then
    if is_service_enabled n-cpu; then
        stop_os_brick_cas_guests
        stop_open_cas_caches
    fi

elif [[ "$1" == "clean" ]]; then
    cleanup_os_brick_cas
fi
