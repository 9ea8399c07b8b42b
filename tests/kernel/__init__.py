import os

if (os.environ.get('OS_BRICK_CAS_KERNEL_PROFILE') == '1' and
        os.environ.get('OS_BRICK_CAS_KERNEL_RESULTS')):
    from tests.kernel import profile
    profile.install(os.path.join(os.environ['OS_BRICK_CAS_KERNEL_RESULTS'],
                                 'processes.tsv'))
