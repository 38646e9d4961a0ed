import pytest
import torch
from PIL import Image

from llamaindex_posfair.multimodal.attention_capture import AttentionRowCapture
from llamaindex_posfair.multimodal.calibrator import (
    AttentionGuidedCalibrator,
    CalibrationMismatchError,
    CalibrationState,
)
from llamaindex_posfair.multimodal.types import Candidates

pytestmark = pytest.mark.slow  # builds the real Qwen tokenizer and tiny models (~5 s once)


def _imgs(image_dir, n):
    return [Image.open(image_dir / f"img_{i:03d}.png").convert("RGB") for i in range(n)]


def test_tokenizer_has_real_qwen_special_ids(qwen_tokenizer):
    ids = qwen_tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|im_start|>"])
    assert ids == [151652, 151653, 151655, 151644]


def test_prompt_expands_image_tokens_and_types(tiny_qwen2_vl, image_dir):
    prep = tiny_qwen2_vl.build_inputs("a red circle", _imgs(image_dir, 3))
    ids = prep.model_inputs["input_ids"][0]
    types = prep.model_inputs["mm_token_type_ids"][0]
    assert len(prep.image_spans) == 3
    for s, e in prep.image_spans:
        assert e - s == 4  # 56x56 -> 4x4 patches -> 2x2 merged tokens
        assert bool((ids[s:e] == 151655).all()) and bool((types[s:e] == 1).all())
        assert int(ids[s - 1]) == 151652 and int(ids[e]) == 151653
    assert int(types.sum()) == 12
    assert prep.answer_position == ids.shape[0] - 1


@pytest.mark.parametrize("family", ["tiny_qwen2_vl", "tiny_qwen2_5_vl"])
def test_forward_returns_logits_and_evidence(family, request, image_dir):
    adapter = request.getfixturevalue(family)
    r = adapter.score("a red circle", _imgs(image_dir, 4))
    assert r.logits.shape == (4,) and r.evidence.shape == (4, 4)
    assert bool((r.evidence > 0).all()) and bool((r.evidence.sum(dim=1) < 1.0).all())


def test_capture_does_not_change_the_logits(tiny_qwen2_vl, image_dir):
    imgs = _imgs(image_dir, 4)
    assert torch.allclose(tiny_qwen2_vl.score("q", imgs).logits, tiny_qwen2_vl.vanilla_logits("q", imgs), atol=1e-5)


def test_captured_rows_match_eager_attention(tiny_qwen2_vl, image_dir):
    adapter = tiny_qwen2_vl
    prep = adapter.build_inputs("a red circle", _imgs(image_dir, 3))
    pos = prep.answer_position
    with torch.no_grad(), adapter._attn(adapter._capture_name), AttentionRowCapture([pos]) as cap:
        adapter.model(**prep.model_inputs, use_cache=False)
    with torch.no_grad(), adapter._attn("eager"):
        ref = adapter.model(**prep.model_inputs, use_cache=False, output_attentions=True).attentions
    rows = cap.rows()[:, 0, 0, :]
    expected = torch.stack([a[0, :, pos, :].mean(dim=0) for a in ref])
    assert torch.allclose(rows, expected, atol=1e-5)


def test_two_token_indices_are_scored_jointly(tiny_qwen2_vl, image_dir):
    imgs = _imgs(image_dir, 12)
    r = tiny_qwen2_vl.score("a red circle", imgs)
    probs = r.logits.double().exp()
    assert r.logits.shape == (12,)
    # "1", "10", "11", "12" all start with "1": their joint probabilities cannot exceed p("1")
    prep = tiny_qwen2_vl.build_inputs("a red circle", imgs)
    with torch.no_grad():
        out = tiny_qwen2_vl.model(**prep.model_inputs, logits_to_keep=1, use_cache=False)
    p_one = torch.softmax(out.logits[0, -1].double(), -1)[tiny_qwen2_vl.tokenizer.convert_tokens_to_ids("1")]
    assert float(probs[[0, 9, 10, 11]].sum()) == pytest.approx(float(p_one), rel=1e-4)


def test_too_many_images_is_a_clear_error(tiny_qwen2_vl, image_dir):
    with pytest.raises(ValueError, match=r"between 2 and 19, got 1"):
        tiny_qwen2_vl.score("q", _imgs(image_dir, 1))


def test_calibrate_round_trip_on_real_architecture(tmp_path, tiny_qwen2_vl, tiny_qwen2_5_vl, image_dir):
    imgs = _imgs(image_dir, 8)
    samples = [Candidates("a red circle", tuple(imgs[i : i + 3]), answer=0) for i in range(2)]
    cal = AttentionGuidedCalibrator()
    state = cal.fit(tiny_qwen2_vl, samples)
    assert state.layer_range == (2, 4) and state.sizes == [3]
    path = state.save(tmp_path / "s.safetensors")
    loaded = CalibrationState.load(path, model_id=tiny_qwen2_vl.model_id, n=3)
    r = tiny_qwen2_vl.score("a blue square", imgs[4:7])
    assert torch.allclose(cal.scores(r), AttentionGuidedCalibrator(state=loaded).scores(r))
    with pytest.raises(CalibrationMismatchError, match="fitted for model"):
        CalibrationState.load(path, model_id=tiny_qwen2_5_vl.model_id)


def test_from_pretrained_reloads_the_same_model(tmp_path, tiny_qwen2_vl, image_dir):
    from llamaindex_posfair.multimodal.qwen_adapter import QwenVLAdapter

    tiny_qwen2_vl.model.save_pretrained(tmp_path)
    tiny_qwen2_vl.tokenizer.save_pretrained(tmp_path)
    tiny_qwen2_vl.image_processor.save_pretrained(tmp_path)
    again = QwenVLAdapter.from_pretrained(tmp_path, max_pixels=56 * 56)
    imgs = _imgs(image_dir, 3)
    assert again.model_id.split("@")[1] == tiny_qwen2_vl.model_id.split("@")[1]  # same config + prompt hash
    assert torch.allclose(again.score("q", imgs).logits, tiny_qwen2_vl.score("q", imgs).logits, atol=1e-5)
