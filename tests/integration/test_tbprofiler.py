"""tb-profiler's published figures for the ResNet50 samples, matched by GET /steps (issue 42).

The expected numbers are torch-tb-profiler's own test results for the same trace files:
pytorch/kineto at 4b3b2ed2a6a1cba126ba79d1aa5211e75740f35f (the last commit with tb_plugin/),
tb_plugin/test/result_check_file.txt, lines 1 and 6 (the overview of run
resnet50_num_workers_0 and resnet50_num_workers_4, worker0, span 1): the step table ("steps":
per step, kernel, memcpy, memset, runtime, DataLoader, CPU exec, other, in us) and the
"Average Step Time" with each role's mean and its share of the mean step ("performance").
Only the numbers are copied here, not tb-profiler's code.

tb-profiler prints whole microseconds: each of our values, rounded, must be its value; a
share is its value rounded to two decimals. tb-profiler has no communication role in a
single-process run; ours must be 0 there."""
import os
import unittest

from fpserver import Server, TRACES

SAMPLES = os.path.join(TRACES, "kineto_tb_plugin", "samples")
ROLES = ["kernel", "memcpy", "memset", "runtime", "data_loading", "cpu_exec", "other"]

# name: (file, steps [[step, kernel, memcpy, memset, runtime, dataloader, cpu exec, other]],
#        average step time, [(role mean, share %) in ROLES order])
TB = {
    "resnet50_num_workers_0": (
        "resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
        [[5, 98598, 1941, 90, 2796, 69317, 14091, 1115], [6, 98570, 1947, 89, 2762, 57669, 12968, 1148],
         [7, 98596, 1931, 91, 2877, 61257, 13768, 1213], [8, 98623, 1938, 89, 2841, 56453, 13420, 1200],
         [9, 98504, 1937, 87, 2788, 62690, 15025, 1141], [10, 98641, 1798, 88, 3381, 48185, 12773, 1117]],
        177592,
        [(98589, 55.51), (1915, 1.08), (89, 0.05), (2908, 1.64), (59262, 33.37), (13674, 7.7), (1156, 0.65)]),
    "resnet50_num_workers_4": (
        "resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
        [[5, 99778, 3606, 98, 41028, 4341, 27460, 5995], [6, 99208, 2948, 98, 3406, 0, 16404, 4119],
         [7, 99114, 2949, 98, 3417, 6, 19521, 2076], [8, 99021, 2975, 97, 3544, 0, 15464, 1978],
         [9, 98791, 3596, 97, 8275, 1370, 43905, 7427], [10, 98956, 2885, 98, 3714, 1400, 13235, 3910]],
        141068,
        [(99145, 70.28), (3160, 2.24), (98, 0.07), (10564, 7.49), (1186, 0.84), (22665, 16.07), (4251, 3.01)]),
}


@unittest.skipUnless(os.path.isdir(SAMPLES), "needs ../shared/data/traces")
class TbProfilerOverview(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.steps = {}
        for run, (path, *_rest) in TB.items():
            with open(os.path.join(SAMPLES, path), "rb") as f:
                sid = cls.srv.upload_ok(f.read(), "?name=" + run)
            cls.steps[run] = cls.srv.json("/api/v1/sessions/%d/steps" % sid)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_every_step_every_role(self):
        for run, (_, steps, _avg, _roles) in TB.items():
            got = self.steps[run]
            self.assertEqual([s["name"] for s in got["steps"]], ["ProfilerStep#%d" % s[0] for s in steps], run)
            for want, s in zip(steps, got["steps"]):
                with self.subTest(run=run, step=want[0]):
                    self.assertEqual([round(s[r + "_us"]) for r in ROLES], want[1:])
                    self.assertEqual(s["communication_us"], 0.0)
                    self.assertAlmostEqual(s["dur_us"], sum(want[1:]), places=6)

    def test_average_step_time_and_shares(self):
        """The step chart's mean step and its percentages per role are these (issue 42, item 8)."""
        for run, (_, _steps, avg, roles) in TB.items():
            with self.subTest(run=run):
                mean = self.steps[run]["mean"]
                self.assertEqual(round(mean["dur_us"]), avg)
                self.assertEqual([round(mean[r + "_us"]) for r in ROLES], [v for v, _ in roles])
                self.assertEqual([round(mean[r + "_us"] / mean["dur_us"] * 100, 2) for r in ROLES], [p for _, p in roles])
                self.assertAlmostEqual(sum(mean[r + "_us"] for r in self.steps[run]["roles"]), mean["dur_us"], places=6)


if __name__ == "__main__":
    unittest.main()
