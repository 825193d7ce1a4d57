import time
import numpy as np, torch
from proclab.data import EpisodeStore
from proclab.rl.runtime import make_runtime
from proclab.worldmodel.checkpoint import load_world_model, freeze
from proclab.interpret.saliency import saliency_batch
from proclab.interpret.targets import parse_targets

def test_smoke(samples, wm_run):
    t=time.time()
    wm, agent, ck = load_world_model(wm_run, make_runtime("cpu","fp32"))
    freeze(wm)
    store = EpisodeStore(samples)
    b = torch.from_numpy(np.stack([store.info(i)["bottleneck"] for i in range(3)]))
    out = saliency_batch(wm, agent, b, parse_targets(["value","action","group:left","hook:core.0.hook_h:3"]), 3, 6, noise=2)
    print({k:{p:v.shape for p,v in g.items()} for k,g in out.grads.items()}, out.targets, time.time()-t)
    ep = [store.read(i) for i in range(3)]
    assert np.array_equal(out.rollout.obs, np.stack([e["obs"] for e in ep]))
