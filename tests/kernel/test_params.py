#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""Runtime parameters as the running release's casadm names them.

The host check (os_brick_cas/host/prep.py) reads ``--get-param`` rows by
the titles of os_brick_cas/opencas/casadm_params.py and leaves out what the
release does not know (the ALRU dirty-ratio rows exist from v25.12): here
the real casadm of each release is asked, through the product's reader.
"""

from os_brick_cas import casadm
from os_brick_cas.opencas import casadm_params as params
from os_brick_cas.opencas import releases
from tests.kernel import base


class RuntimeParamsTestCase(base.KernelTestCase):

    caches = {1: 'wt'}

    def _wanted(self, param: params.Param) -> str:
        """What was set: cleaning and seq-cutoff policy; else defaults."""
        if param.namespace == params.CLEANING and param.option == 'policy':
            return self.cleaning
        if param.namespace == params.SEQ_CUTOFF and param.option == 'policy':
            return 'never'
        return str(param.default)

    def test_every_namespace_has_the_release_s_rows(self):
        cas = casadm.Casadm()
        line = releases.major_minor(cas.version()['CAS CLI Utility'])
        self.assertIsNotNone(line)
        props = self.props(self.image('params'), 'wt')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        # a core joins with Open CAS's own cut-off: set through the product
        cas.set_params(params.SEQ_CUTOFF, 1, [('policy', 'never')],
                       core.core_id)
        for namespace in sorted({p.namespace for p in params.PARAMS}):
            target = ['-i', '1']
            core_id = None
            if namespace == params.SEQ_CUTOFF:
                core_id = core.core_id
                target += ['-j', str(core_id)]
            self.casadm_ok('-G', '-n', namespace, *target, '-o', 'csv',
                           golden='get-param-%s' % namespace)
            found = cas.get_params(namespace, 1, core_id)
            wanted = {p.title: self._wanted(p)
                      for p in params.of_namespace(namespace)
                      if params.supported(p, line)}
            self.assertEqual(wanted, found, namespace)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
