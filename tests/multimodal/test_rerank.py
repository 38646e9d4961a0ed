import base64

import pytest
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle, TextNode

from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator, CalibrationMismatchError
from llamaindex_posfair.multimodal.images import ImageLoadError, load_image
from llamaindex_posfair.multimodal.rerank import PosFairImageRerank
from llamaindex_posfair.multimodal.types import Candidates
from research.multimodal.simulator import SimulatedMLLM


def _redness(img):
    r, g, b = img.getpixel((28, 28))
    return r - g - b


class _ImageSim:
    """Simulator that takes PIL images: relevance 1 for the image whose red channel is highest."""

    def __init__(self):
        self.sim = SimulatedMLLM()

    model_id = "image-sim"
    num_layers = 12

    def score(self, query, images):
        from research.multimodal.simulator import SimImage

        reds = [_redness(img) for img in images]
        best = max(range(len(images)), key=lambda i: reds[i])
        sims = [SimImage(i, 1.0 if i == best else 0.0, gold=i == best) for i in range(len(images))]
        return self.sim.score(query, sims)


@pytest.fixture(scope="module")
def scorer_and_state(image_dir):
    from PIL import Image

    scorer = _ImageSim()
    imgs = [Image.open(image_dir / f"img_{i:03d}.png").convert("RGB") for i in range(12)]
    samples = []
    for i in range(5):
        group = tuple(imgs[(i + j) % 12] for j in range(4))
        reds = [_redness(im) for im in group]
        samples.append(Candidates("red", group, answer=max(range(4), key=lambda k: reds[k])))
    return scorer, AttentionGuidedCalibrator().fit(scorer, samples)


def _nodes(image_dir, idx, how="path"):
    out = []
    for rank, i in enumerate(idx):
        p = image_dir / f"img_{i:03d}.png"
        if how == "path":
            node = ImageNode(image_path=str(p), id_=f"n{i}")
        else:
            node = ImageNode(image=base64.b64encode(p.read_bytes()).decode(), id_=f"n{i}")
        out.append(NodeWithScore(node=node, score=1.0 - 0.1 * rank))
    return out


def test_rerank_puts_the_red_image_first(scorer_and_state, image_dir):
    scorer, state = scorer_and_state
    rr = PosFairImageRerank(scorer=scorer, calibration=state, top_n=2)
    # img_000 is red on green; place it last (the disfavoured slot)
    out = rr.postprocess_nodes(_nodes(image_dir, [1, 2, 3, 0]), query_bundle=QueryBundle("red"))
    assert next(n.node.node_id for n in out) == "n0"
    assert len(out) == 2 and out[0].score >= out[1].score
    assert out[0].node.metadata["retrieval_score"] == pytest.approx(0.7)


def test_vanilla_keeps_the_slot_bias(scorer_and_state, image_dir):
    scorer, _ = scorer_and_state
    rr = PosFairImageRerank(scorer=scorer, method="vanilla", top_n=1)
    out = rr.postprocess_nodes(_nodes(image_dir, [1, 2, 3, 0]), query_bundle=QueryBundle("red"))
    assert out[0].node.node_id == "n1"  # the favoured first slot wins


def test_base64_nodes_score_like_path_nodes(scorer_and_state, image_dir):
    scorer, state = scorer_and_state
    rr = PosFairImageRerank(scorer=scorer, calibration=state, top_n=4)
    a = rr.postprocess_nodes(_nodes(image_dir, [4, 0, 5, 6]), query_bundle=QueryBundle("red"))
    b = rr.postprocess_nodes(_nodes(image_dir, [4, 0, 5, 6], how="b64"), query_bundle=QueryBundle("red"))
    assert [n.node.node_id for n in a] == [n.node.node_id for n in b]
    assert [n.score for n in a] == pytest.approx([n.score for n in b])


async def test_async_matches_sync(scorer_and_state, image_dir):
    scorer, state = scorer_and_state
    rr = PosFairImageRerank(scorer=scorer, calibration=state, top_n=4)
    sync = rr.postprocess_nodes(_nodes(image_dir, [1, 2, 3, 0]), query_bundle=QueryBundle("red"))
    got = await rr.apostprocess_nodes(_nodes(image_dir, [1, 2, 3, 0]), query_bundle=QueryBundle("red"))
    assert [n.node.node_id for n in got] == [n.node.node_id for n in sync]


def test_more_images_than_fitted_is_a_clear_error(scorer_and_state, image_dir):
    scorer, state = scorer_and_state
    rr = PosFairImageRerank(scorer=scorer, calibration=state)
    with pytest.raises(CalibrationMismatchError, match=r"got 6 candidate images .* at most N=4"):
        rr.postprocess_nodes(_nodes(image_dir, range(6)), query_bundle=QueryBundle("red"))


def test_missing_image_file_names_the_node(scorer_and_state, image_dir, tmp_path):
    scorer, state = scorer_and_state
    rr = PosFairImageRerank(scorer=scorer, calibration=state)
    nodes = _nodes(image_dir, [0, 1, 2])
    nodes.append(NodeWithScore(node=ImageNode(image_path=str(tmp_path / "gone.png"), id_="lost"), score=0.1))
    with pytest.raises(FileNotFoundError, match=r"node lost: .*gone.png.*does not exist"):
        rr.postprocess_nodes(nodes, query_bundle=QueryBundle("red"))


def test_corrupt_image_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(ImageLoadError, match="bad.png.*not a readable image"):
        load_image(bad)


def test_remote_url_is_refused():
    with pytest.raises(ImageLoadError, match="not fetched"):
        load_image("https://example.com/cat.jpg")


def test_text_node_is_refused(scorer_and_state, image_dir):
    scorer, state = scorer_and_state
    rr = PosFairImageRerank(scorer=scorer, calibration=state)
    nodes = _nodes(image_dir, [0, 1, 2]) + [NodeWithScore(node=TextNode(text="hi", id_="t"), score=0.1)]
    with pytest.raises(ImageLoadError, match="node t has no image"):
        rr.postprocess_nodes(nodes, query_bundle=QueryBundle("red"))


def test_calibration_from_another_model_is_refused(scorer_and_state):
    _, state = scorer_and_state
    with pytest.raises(CalibrationMismatchError, match="fitted for model 'image-sim'"):
        PosFairImageRerank(scorer=SimulatedMLLM(), calibration=state)


def test_calibrated_method_without_state_is_refused():
    with pytest.raises(ValueError, match="needs a calibration state"):
        PosFairImageRerank(scorer=SimulatedMLLM())


def test_settings_are_validated_fields():
    with pytest.raises(Exception, match="top_n"):
        PosFairImageRerank(scorer=SimulatedMLLM(), method="vanilla", top_n=0)


def test_round_trips_through_to_dict_with_its_calibration(scorer_and_state, image_dir, tmp_path):
    from PIL import Image

    scorer, state = scorer_and_state
    path = state.save(tmp_path / "cal.safetensors")
    rr = PosFairImageRerank(scorer=scorer, calibration=path, top_n=2, sharpen=3.0)
    data = rr.to_dict()
    assert data["class_name"] == PosFairImageRerank.__name__  # not the base class's name
    again = PosFairImageRerank.from_dict(data, scorer=scorer)
    assert again.to_dict() == data
    imgs = [Image.open(image_dir / f"img_{i:03d}.png").convert("RGB") for i in (3, 7, 1, 9)]
    assert again.rerank_scores("red", imgs).tolist() == rr.rerank_scores("red", imgs).tolist()


def test_serialised_settings_of_another_model_are_refused(scorer_and_state):
    scorer, state = scorer_and_state
    data = PosFairImageRerank(scorer=scorer, calibration=state).to_dict()
    with pytest.raises(ValueError, match="model_id='image-sim' .* is not the scorer's model 'simulated-mllm"):
        PosFairImageRerank.from_dict(data, scorer=SimulatedMLLM())


@pytest.mark.slow
def test_full_path_with_tiny_qwen(tmp_path, tiny_qwen2_vl, image_dir):
    from PIL import Image

    imgs = [Image.open(image_dir / f"img_{i:03d}.png").convert("RGB") for i in range(8)]
    samples = [Candidates("a red circle", tuple(imgs[i : i + 4]), answer=i % 4) for i in range(2)]
    path = AttentionGuidedCalibrator().fit(tiny_qwen2_vl, samples).save(tmp_path / "cal.safetensors")
    rr = PosFairImageRerank(scorer=tiny_qwen2_vl, calibration=str(path), top_n=4)
    out = rr.postprocess_nodes(_nodes(image_dir, [4, 5, 6, 7]), query_bundle=QueryBundle("a red circle"))
    assert sorted(n.node.node_id for n in out) == ["n4", "n5", "n6", "n7"]
    assert sum(n.score for n in out) == pytest.approx(1.0, abs=1e-6)
    assert [n.score for n in out] == sorted((n.score for n in out), reverse=True)
