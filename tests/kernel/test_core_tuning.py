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

"""A core the attach adds gets the host layout's sequential cut-off.

Real casadm has no seq-cutoff option at --add-core and starts each core
with Open CAS's default; the attach sets the layout's value with one
``--set-param --core-id``. A refused call would only cost a warning, so
the value itself is read back here.
"""


from os_brick_cas.opencas import casadm_output
from tests.kernel import base


class NewCoreSeqCutoffTestCase(base.KernelTestCase):

    caches = {1: 'wt', 2: 'wb'}

    def seq_cutoff(self, core: casadm_output.Core,
                   golden: str) -> dict[str, str]:
        out = self.casadm_ok('-G', '-n', 'seq-cutoff', '-i',
                             str(core.cache_id), '-j', str(core.core_id),
                             '-o', 'csv', golden=golden)
        rows = [line.split(',', 1) for line in out.splitlines()[1:]]
        return {title: value for title, value in rows}

    def test_the_attach_gives_each_new_core_the_layouts_policy(self):
        infos = []
        for mode in ('wt', 'wb'):
            props = self.props(self.image('seq-%s' % mode), mode)
            infos.append((props, self.connector.connect_volume(props)))
        cores = sorted(self.cores(), key=lambda core: core.cache_id)
        self.assertEqual(
            ['never', 'never'],
            [self.seq_cutoff(core, 'get-param-seq-cutoff-core-%d' %
                             core.cache_id)['Sequential cutoff policy']
             for core in cores])
        # the other values are Open CAS's own, untouched
        values = self.seq_cutoff(cores[0], 'get-param-seq-cutoff-core')
        self.assertEqual('1024', values['Sequential cutoff threshold [KiB]'])
        for props, info in infos:
            self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.cores())
