import re

from run_builders import make_scheduled_run, make_step

from specviz.roles import output_roles, step_roles
from specviz.runfile import Step, draft_batches
from specviz.view.render import output_end, output_html, pieces_html, step_html, steps_html, visible


def _texts(step: Step, drafts: list[str], sampled: list[str]) -> Step:
    return step.model_copy(update={"draft_texts": drafts, "sampled_texts": sampled})


def test_the_weather_step_has_every_role_in_order():
    step = _texts(make_step(1, [1, 2, 3, 4], [1, 2, 5]), [" sunny", " and", " warm", " outside"],
                  [" sunny", " and", " clear"])
    assert step_roles(step) == [(" sunny", "accepted"), (" and", "accepted"), (" warm", "rejected"),
                                (" clear", "correction"), (" outside", "discarded")]


def test_bonus_and_plain_steps():
    assert [r for _, r in step_roles(make_step(2, [7, 8], [7, 8, 9]))] == ["accepted", "accepted", "bonus"]
    assert step_roles(make_step(0, [], [6])) == [("6", "plain")]


def test_output_roles_follow_committed_tokens(weather_run):
    roles = [r for _, r in output_roles(weather_run.requests[0])]
    assert roles == ["plain", "accepted", "accepted", "correction", "accepted", "accepted", "accepted", "bonus"]


def test_token_text_is_escaped_and_whitespace_is_visible():
    evil = '<script>alert("x")</script>'
    step = _texts(make_step(1, [1, 2], [1, 3]), [evil, "a b\n"], [evil, '<img src=x onerror="y">'])
    html = step_html(step, "step <1>")
    assert "<script>" not in html and "<img" not in html and "step <1>" not in html
    assert "&lt;script&gt;" in html and "&lt;img" in html
    assert visible("a b\n\t") == 'a<span class="sv-ws">␣</span>b<span class="sv-ws">↵</span><span class="sv-ws">→</span>'


def test_output_html_escapes_and_keeps_newlines(weather_run):
    req = weather_run.requests[0]
    steps = [s.model_copy(update={"sampled_texts": ["<b>\n"] * len(s.sampled_token_ids)}) for s in req.steps]
    html = output_html(req.model_copy(update={"steps": steps}))
    assert "<b>" not in html and html.count("&lt;b&gt;</span><br>") == len(req.output_token_ids)


def test_code_breaks_where_the_text_breaks_and_keeps_its_indentation():
    pieces = [("def", "plain"), (" f", "accepted"), ("():", "correction"), ("\n        ", "accepted"),
              ("return", "bonus"), (" x", "accepted"), (")\n", "correction"), ("  <y>", "plain")]
    html = pieces_html(pieces)
    # one span per piece, each with its role's class
    assert html.count('class="sv-chip ') == len(pieces)
    # newline + 8 spaces: a line break, the indentation kept (uncoloured), the colour as a thin mark
    assert ('<span class="sv-chip sv-accepted sv-brk sv-mark" title="accepted draft"><br>        </span>'
            in html)
    # visible text and a newline: the text coloured, then the break
    assert '<span class="sv-chip sv-correction sv-brk" title="' in html
    assert '<span class="sv-ink">)</span><br></span>' in html
    # ordinary tokens stay ordinary chips; text stays escaped, spaces included
    assert '<span class="sv-chip sv-accepted" title="accepted draft"> f</span>' in html
    assert "&lt;y&gt;" in html and "<y>" not in html
    # no raw newline reaches the markdown (a blank line would end Streamlit's HTML block)
    assert "\n" not in html


def test_blank_and_indented_pieces_escape_and_mark_new():
    html = pieces_html([("\n\n", "bonus"), ("\n  <b>&", "accepted")], newest=1)
    assert 'sv-bonus sv-brk sv-mark" title="bonus token (all drafts accepted)"><br><br></span>' in html
    assert 'sv-accepted sv-brk sv-new"' in html
    assert '<br>  <span class="sv-ink">&lt;b&gt;&amp;</span></span>' in html


def test_step_chips_keep_visible_whitespace_marks():
    step = _texts(make_step(1, [1, 2], [1, 3]), ["\n    ", "x"], ["\n    ", "y"])
    html = step_html(step)
    assert "<br>" not in html and "\n" not in html
    assert '<span class="sv-ws">↵</span>' + '<span class="sv-ws">␣</span>' * 4 in html


def test_a_marked_output_token_is_outlined_in_its_step_row_with_its_hover_text(weather_run):
    from specviz.roles import committed_chip

    steps = weather_run.requests[0].steps  # committed: [6] | [1, 2, 5] | [7, 8, 9, 2]
    assert [committed_chip(steps[1], j) for j in range(3)] == [0, 1, 3]  # 'clear' comes after ~~warm~~
    assert [committed_chip(steps[2], j) for j in range(4)] == [0, 1, 2, 3]  # all accepted, then the bonus
    html = steps_html(steps, marks={3: "the outputs part <here>"})  # output token 3 = 'clear' (id 5)
    rows = html.split('<div class="sv-row">')[1:]
    assert "sv-diverge" not in rows[0] + rows[2]
    assert rows[1].count("sv-diverge") == 1
    assert 'class="sv-chip sv-correction sv-diverge" title="the outputs part &lt;here&gt; (' in rows[1]
    # rows shown from the middle of the output keep the token numbering of the whole output
    assert "sv-diverge" in steps_html(steps[1:], start=1, marks={3: "x"}, first_token=1)


def test_step_rows_show_each_steps_k_and_for_a_schedule_the_batch_it_was_proposed_at(weather_run):
    run = make_scheduled_run()
    req = run.requests[0]
    html = steps_html(req.steps, batches=draft_batches(run.requests)["r0"])
    assert re.findall(r'class="sv-stepk"[^>]*>([^<]*)<', html) == [
        "k=0", "k=4 · batch 1", "k=4 · batch 1", "k=1 · batch 2", "k=1 · batch 2", "k=4 · batch 1"]
    assert 'title="4 drafts proposed and verified in this step, proposed in the request&#x27;s previous step, ' \
           'when 1 of the run&#x27;s requests were in the batch' in html
    static = steps_html(weather_run.requests[0].steps)  # k does not follow the batch: no batch shown
    assert re.findall(r'class="sv-stepk"[^>]*>([^<]*)<', static) == ["k=0", "k=4", "k=3"]
    assert "sv-stepk" not in step_html(req.steps[1])  # the worked example's single step: chips only


def test_output_end_says_why_an_output_stops_mid_line(weather_run):
    """The showcase's output stops mid-signature ('def describe_discount_custom(items, tax_rate') at its
    320-token limit, with nothing to say it was cut there."""
    req = weather_run.requests[0]
    n = len(req.output_token_ids)
    assert output_end(req.model_copy(update={"finish_reason": "length"})) == (
        f"Output limit reached: {n} tokens (max_tokens); the model had not finished.")
    assert output_end(req.model_copy(update={"finish_reason": "abort"})).startswith(f"Stopped after {n} tokens")
    assert output_end(req.model_copy(update={"finish_reason": "stop"})) is None
    assert output_end(req.model_copy(update={"finish_reason": None})) is None  # still running, or cut off
