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


"""The flush progress line: percent, MiB/s and ETA from two dirty counts."""

import io

import testtools

from os_brick_cas.cmd import progress


class ProgressLineTestCase(testtools.TestCase):

    def test_percent_rate_and_eta(self):
        # 25600 blocks (100 MiB) dirty; 2560 (10 MiB) written in 2 s
        text = progress.line(25600, progress.Sample(10.0, 25600),
                             progress.Sample(12.0, 23040))
        self.assertEqual('10% flushed, 5.0 MiB/s, 23040 dirty blocks left, '
                         'ETA 0:00:18', text)

    def test_no_progress_yet_has_no_eta(self):
        text = progress.line(100, progress.Sample(0.0, 100),
                             progress.Sample(1.0, 100))
        self.assertEqual('0% flushed, 0.0 MiB/s, 100 dirty blocks left, '
                         'ETA unknown', text)

    def test_watch_raises_the_flush_error_after_showing_progress(self):
        counts = iter([90, 60])

        def flush():
            import time
            time.sleep(1.0)   # a poll or more before it fails, if loaded
            raise RuntimeError('flush failed')
        out = io.StringIO()
        self.assertRaises(RuntimeError, progress.watch, flush,
                          lambda: next(counts, 60), 100, 'core 1', out,
                          tty=False, poll=0.1)
        lines = out.getvalue().splitlines()
        self.assertTrue(lines[0].startswith('core 1: 10% flushed'), lines)
