// The built-in templates. Each mirrors one branch of llama.cpp's llm_chat_apply_template
// (src/llama-chat.cpp), byte for byte: literal turn markers instead of bos_token/eos_token
// (the C++ formatter hard-codes them), `| trim` exactly where it calls trim(), and no
// generation prompt where it ignores add_ass. Every tag strips the whitespace around it,
// so the line breaks between tags below are layout only.
#include "chat/builtin_templates.h"

#include <map>

namespace ws::chat {
namespace {

struct Builtin {
  const char* name;
  const char* source;
};

// `message.content or ''`: llama.cpp's formatter sees an empty string for a null content
// (an assistant turn that only called tools), where `+` on none would fail.
constexpr Builtin kBuiltins[] = {
    {"bailing", R"jinja(
{%- for message in messages -%}
{{- '<role>' + ('HUMAN' if message.role == 'user' else message.role | upper) + '</role>' + (message.content or '') -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<role>ASSISTANT</role>' -}}{%- endif -%}
)jinja"},
    {"bailing-think", R"jinja(
{%- for message in messages -%}
{{- '<role>' + ('HUMAN' if message.role == 'user' else message.role | upper) + '</role>' + (message.content or '') -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<role>ASSISTANT</role><think>' -}}{%- endif -%}
)jinja"},
    {"bailing2", R"jinja(
{%- if not (messages and messages[0].role == 'system') -%}
{{- '<role>SYSTEM</role>detailed thinking off<|role_end|>' -}}
{%- endif -%}
{%- for message in messages -%}
{{- '<role>' + ('HUMAN' if message.role == 'user' else message.role | upper) + '</role>' + (message.content or '') + '<|role_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<role>ASSISTANT</role>' -}}{%- endif -%}
)jinja"},
    {"chatglm3", R"jinja(
{{- '[gMASK]sop' -}}
{%- for message in messages -%}
{{- '<|' + message.role + '|>\n ' + (message.content or '') -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}
)jinja"},
    {"chatglm4", R"jinja(
{{- '[gMASK]<sop>' -}}
{%- for message in messages -%}
{{- '<|' + message.role + '|>\n' + (message.content or '') -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}
)jinja"},
    {"chatml", R"jinja(
{%- for message in messages -%}
{{- '<|im_start|>' + message.role + '\n' + (message.content or '') + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
)jinja"},
    {"command-r", R"jinja(
{%- set tokens = {'system': '<|SYSTEM_TOKEN|>', 'user': '<|USER_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'} -%}
{%- for message in messages if message.role in tokens -%}
{{- '<|START_OF_TURN_TOKEN|>' + tokens[message.role] + (message.content or '') | trim + '<|END_OF_TURN_TOKEN|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}{%- endif -%}
)jinja"},
    {"deepseek", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- message.content or '' -}}
{%- elif message.role == 'user' -%}{{- '### Instruction:\n' + (message.content or '') + '\n' -}}
{%- elif message.role == 'assistant' -%}{{- '### Response:\n' + (message.content or '') + '\n<|EOT|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '### Response:\n' -}}{%- endif -%}
)jinja"},
    {"deepseek-ocr", R"jinja(
{%- for message in messages -%}{{- message.content or '' -}}{%- endfor -%}
)jinja"},
    {"deepseek2", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n\n' -}}
{%- elif message.role == 'user' -%}{{- 'User: ' + (message.content or '') + '\n\n' -}}
{%- elif message.role == 'assistant' -%}{{- 'Assistant: ' + (message.content or '') + '<｜end▁of▁sentence｜>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}
)jinja"},
    {"deepseek3", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n\n' -}}
{%- elif message.role == 'user' -%}{{- '<｜User｜>' + (message.content or '') -}}
{%- elif message.role == 'assistant' -%}{{- '<｜Assistant｜>' + (message.content or '') + '<｜end▁of▁sentence｜>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<｜Assistant｜>' -}}{%- endif -%}
)jinja"},
    {"exaone-moe", R"jinja(
{%- for message in messages if message.role in ['system', 'user', 'assistant', 'tool'] -%}
{{- '<|' + message.role + '|>\n' + (message.content or '') | trim + '<|endofturn|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}
)jinja"},
    {"exaone3", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- '[|system|]' + (message.content or '') | trim + '[|endofturn|]\n' -}}
{%- elif message.role == 'user' -%}{{- '[|user|]' + (message.content or '') | trim + '\n' -}}
{%- elif message.role == 'assistant' -%}{{- '[|assistant|]' + (message.content or '') | trim + '[|endofturn|]\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '[|assistant|]' -}}{%- endif -%}
)jinja"},
    {"exaone4", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'user' -%}{{- '[|user|]' + (message.content or '') | trim + '\n' -}}
{%- elif message.role in ['system', 'assistant', 'tool'] -%}
{{- '[|' + message.role + '|]' + (message.content or '') | trim + '[|endofturn|]\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '[|assistant|]' -}}{%- endif -%}
)jinja"},
    {"falcon3", R"jinja(
{%- for message in messages -%}
{{- '<|' + message.role + '|>\n' + (message.content or '') + '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}
)jinja"},
    {"gemma", R"jinja(
{#- No system turn in Gemma: the system prompts are merged into the next user turn. -#}
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- set ns.system = ns.system + (message.content or '') | trim -%}
{%- else -%}
{%- set role = 'model' if message.role == 'assistant' else message.role -%}
{{- '<start_of_turn>' + role + '\n' -}}
{%- if ns.system and role != 'model' -%}{{- ns.system + '\n\n' -}}{%- set ns.system = '' -%}{%- endif -%}
{{- (message.content or '') | trim + '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}
)jinja"},
    {"gigachat", R"jinja(
{%- set has_system = messages and messages[0].role == 'system' -%}
{{- '<s>' -}}
{%- if has_system -%}{{- (messages[0].content or '') + '<|message_sep|>' -}}{%- endif -%}
{%- for message in (messages[1:] if has_system else messages) -%}
{%- if message.role == 'user' -%}
{{- 'user<|role_sep|>' + (message.content or '') + '<|message_sep|>available functions<|role_sep|>[]<|message_sep|>' -}}
{%- elif message.role == 'assistant' -%}
{{- 'assistant<|role_sep|>' + (message.content or '') + '<|message_sep|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'assistant<|role_sep|>' -}}{%- endif -%}
)jinja"},
    {"glmedge", R"jinja(
{%- for message in messages -%}
{{- '<|' + message.role + '|>\n' + (message.content or '') -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}
)jinja"},
    {"gpt-oss", R"jinja(
{%- for message in messages -%}
{{- '<|start|>' + message.role + '<|message|>' + (message.content or '') -}}
{{- '<|return|>' if message.role == 'assistant' else '<|end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start|>assistant' -}}{%- endif -%}
)jinja"},
    {"granite", R"jinja(
{%- for message in messages -%}
{{- '<|start_of_role|>' + message.role + '<|end_of_role|>' -}}
{%- if message.role == 'assistant_tool_call' -%}{{- '<|tool_call|>' -}}{%- endif -%}
{{- (message.content or '') + '<|end_of_text|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}
)jinja"},
    {"granite-4.0", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'assistant_tool_call' -%}{{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' -}}
{%- else -%}{{- '<|start_of_role|>' + message.role + '<|end_of_role|>' -}}
{%- endif -%}
{{- (message.content or '') + '<|end_of_text|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}
)jinja"},
    {"granite-4.1", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'assistant_tool_call' -%}{{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' -}}
{%- else -%}{{- '<|start_of_role|>' + message.role + '<|end_of_role|>' -}}
{%- endif -%}
{{- (message.content or '') + '<|end_of_text|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}
)jinja"},
    {"grok-2", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- 'System: ' + (message.content or '') | trim + '<|separator|>\n\n' -}}
{%- elif message.role == 'user' -%}{{- 'Human: ' + (message.content or '') | trim + '<|separator|>\n\n' -}}
{%- elif message.role == 'assistant' -%}{{- 'Assistant: ' + (message.content or '') + '<|separator|>\n\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}
)jinja"},
    {"hunyuan-dense", R"jinja(
{%- for message in messages -%}
{%- if loop.first and message.role == 'system' -%}{{- (message.content or '') + '<｜hy_place▁holder▁no▁3｜>' -}}{%- endif -%}
{%- if message.role == 'assistant' -%}{{- '<｜hy_Assistant｜>' + (message.content or '') + '<｜hy_place▁holder▁no▁2｜>' -}}
{%- elif message.role == 'user' -%}{{- '<｜hy_User｜>' + (message.content or '') + '<｜hy_Assistant｜>' -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"hunyuan-moe", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- '<|startoftext|>' + (message.content or '') + '<|extra_4|>' -}}
{%- elif message.role == 'assistant' -%}{{- (message.content or '') + '<|eos|>' -}}
{%- else -%}{{- '<|startoftext|>' + (message.content or '') + '<|extra_0|>' -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"hunyuan-vl", R"jinja(
{{- '<｜hy_begin▁of▁sentence｜>' -}}
{%- for message in messages -%}
{%- if loop.first and message.role == 'system' -%}{{- (message.content or '') + '<｜hy_place▁holder▁no▁3｜>' -}}
{%- elif message.role == 'user' -%}{{- (message.content or '') + '<｜hy_User｜>' -}}
{%- elif message.role == 'assistant' -%}{{- (message.content or '') + '<｜hy_Assistant｜>' -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"kimi-k2", R"jinja(
{%- set headers = {'system': '<|im_system|>system', 'user': '<|im_user|>user', 'assistant': '<|im_assistant|>assistant', 'tool': '<|im_system|>tool'} -%}
{%- for message in messages -%}
{%- if message.role in headers -%}{{- headers[message.role] + '<|im_middle|>' -}}{%- endif -%}
{{- (message.content or '') + '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_assistant|>assistant<|im_middle|>' -}}{%- endif -%}
)jinja"},
    // llama2*: the history starts inside an [INST] turn; an assistant turn closes it and
    // the next message opens a new one. The generation prompt is implied by " [/INST]".
    {"llama2", R"jinja(
{%- set ns = namespace(inside=true) -%}
{{- '[INST] ' -}}
{%- for message in messages -%}
{%- if not ns.inside -%}{{- '[INST] ' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n' -}}
{%- elif message.role == 'user' -%}{{- (message.content or '') + ' [/INST]' -}}
{%- else -%}{{- (message.content or '') + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"llama2-sys", R"jinja(
{%- set ns = namespace(inside=true) -%}
{{- '[INST] ' -}}
{%- for message in messages -%}
{%- if not ns.inside -%}{{- '[INST] ' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- '<<SYS>>\n' + (message.content or '') + '\n<</SYS>>\n\n' -}}
{%- elif message.role == 'user' -%}{{- (message.content or '') + ' [/INST]' -}}
{%- else -%}{{- (message.content or '') + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"llama2-sys-bos", R"jinja(
{%- set ns = namespace(inside=true) -%}
{{- '[INST] ' -}}
{%- for message in messages -%}
{%- if not ns.inside -%}{{- '<s>[INST] ' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- '<<SYS>>\n' + (message.content or '') + '\n<</SYS>>\n\n' -}}
{%- elif message.role == 'user' -%}{{- (message.content or '') + ' [/INST]' -}}
{%- else -%}{{- (message.content or '') + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"llama2-sys-strip", R"jinja(
{%- set ns = namespace(inside=true) -%}
{{- '[INST] ' -}}
{%- for message in messages -%}
{%- set content = (message.content or '') | trim -%}
{%- if not ns.inside -%}{{- '[INST] ' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- '<<SYS>>\n' + content + '\n<</SYS>>\n\n' -}}
{%- elif message.role == 'user' -%}{{- content + ' [/INST]' -}}
{%- else -%}{{- content + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"llama3", R"jinja(
{%- for message in messages -%}
{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + (message.content or '') | trim + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}
)jinja"},
    {"llama4", R"jinja(
{%- for message in messages -%}
{{- '<|header_start|>' + message.role + '<|header_end|>\n\n' + (message.content or '') | trim + '<|eot|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|header_start|>assistant<|header_end|>\n\n' -}}{%- endif -%}
)jinja"},
    {"megrez", R"jinja(
{%- for message in messages -%}
{{- '<|role_start|>' + message.role + '<|role_end|>' + (message.content or '') + '<|turn_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|role_start|>assistant<|role_end|>' -}}{%- endif -%}
)jinja"},
    {"minicpm", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'user' -%}{{- '<用户>' + (message.content or '') | trim + '<AI>' -}}
{%- else -%}{{- (message.content or '') | trim -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    // mistral-v1/v3/v3-tekken differ in the spaces around [INST] and in trimming replies.
    {"mistral-v1", R"jinja(
{%- set ns = namespace(inside=false) -%}
{%- for message in messages -%}
{%- if not ns.inside -%}{{- ' [INST] ' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n\n' -}}
{%- elif message.role == 'user' -%}{{- (message.content or '') + ' [/INST]' -}}
{%- else -%}{{- ' ' + (message.content or '') + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"mistral-v3", R"jinja(
{%- set ns = namespace(inside=false) -%}
{%- for message in messages -%}
{%- if not ns.inside -%}{{- '[INST] ' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n\n' -}}
{%- elif message.role == 'user' -%}{{- (message.content or '') + '[/INST]' -}}
{%- else -%}{{- ' ' + (message.content or '') | trim + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"mistral-v3-tekken", R"jinja(
{%- set ns = namespace(inside=false) -%}
{%- for message in messages -%}
{%- if not ns.inside -%}{{- '[INST]' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n\n' -}}
{%- elif message.role == 'user' -%}{{- (message.content or '') + '[/INST]' -}}
{%- else -%}{{- (message.content or '') + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"mistral-v7", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- '[SYSTEM_PROMPT] ' + (message.content or '') + '[/SYSTEM_PROMPT]' -}}
{%- elif message.role == 'user' -%}{{- '[INST] ' + (message.content or '') + '[/INST]' -}}
{%- else -%}{{- ' ' + (message.content or '') + '</s>' -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"mistral-v7-tekken", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- '[SYSTEM_PROMPT]' + (message.content or '') + '[/SYSTEM_PROMPT]' -}}
{%- elif message.role == 'user' -%}{{- '[INST]' + (message.content or '') + '[/INST]' -}}
{%- else -%}{{- (message.content or '') + '</s>' -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"monarch", R"jinja(
{%- for message in messages -%}
{{- ('' if loop.first else '<s>') + message.role + '\n' + (message.content or '') + '</s>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<s>assistant\n' -}}{%- endif -%}
)jinja"},
    {"openchat", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '<|end_of_turn|>' -}}
{%- else -%}
{{- 'GPT4 Correct ' + message.role[:1] | upper + message.role[1:] + ': ' + (message.content or '') + '<|end_of_turn|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'GPT4 Correct Assistant:' -}}{%- endif -%}
)jinja"},
    {"orion", R"jinja(
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}{%- set ns.system = ns.system + (message.content or '') -%}
{%- elif message.role == 'user' -%}
{{- 'Human: ' -}}
{%- if ns.system -%}{{- ns.system + '\n\n' -}}{%- set ns.system = '' -%}{%- endif -%}
{{- (message.content or '') + '\n\nAssistant: </s>' -}}
{%- else -%}{{- (message.content or '') + '</s>' -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"pangu-embedded", R"jinja(
{%- set names = {'system': '系统', 'user': '用户', 'assistant': '助手', 'tool': '工具', 'function': '方法'} -%}
{%- for message in messages -%}
{%- if loop.first and message.role != 'system' -%}{{- '[unused9]系统：[unused10]' -}}{%- endif -%}
{%- if message.role in names -%}{{- '[unused9]' + names[message.role] + '：' + (message.content or '') + '[unused10]' -}}{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '[unused9]助手：' -}}{%- endif -%}
)jinja"},
    {"phi3", R"jinja(
{%- for message in messages -%}
{{- '<|' + message.role + '|>\n' + (message.content or '') + '<|end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}
)jinja"},
    {"phi4", R"jinja(
{%- for message in messages -%}
{{- '<|im_start|>' + message.role + '<|im_sep|>' + (message.content or '') + '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant<|im_sep|>' -}}{%- endif -%}
)jinja"},
    // rwkv-world always ends a trailing user turn with "Assistant:" (its EOT is "\n\n").
    {"rwkv-world", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- 'System: ' + (message.content or '') | trim + '\n\n' -}}
{%- elif message.role == 'user' -%}
{{- 'User: ' + (message.content or '') | trim + '\n\n' -}}
{%- if loop.last -%}{{- 'Assistant:' -}}{%- endif -%}
{%- elif message.role == 'assistant' -%}{{- 'Assistant: ' + (message.content or '') | trim + '\n\n' -}}
{%- endif -%}
{%- endfor -%}
)jinja"},
    {"seed_oss", R"jinja(
{%- for message in messages -%}
{%- set content = (message.content or '') | trim if message.role == 'assistant' else (message.content or '') -%}
{{- '<seed:bos>' + message.role + '\n' + content + '<seed:eos>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<seed:bos>assistant\n' -}}{%- endif -%}
)jinja"},
    // smolvlm: <|im_start|> is SmolVLM's BOS here, not a chatml turn marker.
    {"smolvlm", R"jinja(
{{- '<|im_start|>' -}}
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n\n' -}}
{%- elif message.role == 'user' -%}{{- 'User: ' + (message.content or '') + '<end_of_utterance>\n' -}}
{%- else -%}{{- 'Assistant: ' + (message.content or '') + '<end_of_utterance>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}
)jinja"},
    {"solar-open", R"jinja(
{%- for message in messages -%}
{{- '<|begin|>' + message.role + '<|content|>' + (message.content or '') + '<|end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|begin|>assistant' -}}{%- endif -%}
)jinja"},
    {"vicuna", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- (message.content or '') + '\n\n' -}}
{%- elif message.role == 'user' -%}{{- 'USER: ' + (message.content or '') + '\n' -}}
{%- elif message.role == 'assistant' -%}{{- 'ASSISTANT: ' + (message.content or '') + '</s>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'ASSISTANT:' -}}{%- endif -%}
)jinja"},
    {"vicuna-orca", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'system' -%}{{- 'SYSTEM: ' + (message.content or '') + '\n' -}}
{%- elif message.role == 'user' -%}{{- 'USER: ' + (message.content or '') + '\n' -}}
{%- elif message.role == 'assistant' -%}{{- 'ASSISTANT: ' + (message.content or '') + '</s>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'ASSISTANT:' -}}{%- endif -%}
)jinja"},
    // yandex: "\n\n" is the model's end of turn; system messages are dropped.
    {"yandex", R"jinja(
{%- for message in messages -%}
{%- if message.role == 'user' -%}{{- ' Пользователь: ' + (message.content or '') + '\n\n' -}}
{%- elif message.role == 'assistant' -%}{{- ' Ассистент: ' + (message.content or '') + '\n\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- ' Ассистент:[SEP]' -}}{%- endif -%}
)jinja"},
    {"zephyr", R"jinja(
{%- for message in messages -%}
{{- '<|' + message.role + '|>\n' + (message.content or '') + '<|endoftext|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}
)jinja"},
};

using Registry = std::map<std::string, std::string, std::less<>>;

// Built on first use; the sources start with a newline (raw-string layout) that the
// leading {%- strips at render time, but keep them exact for /props and logs.
const Registry& registry() {
  static const Registry r = [] {
    Registry m;
    for (const Builtin& b : kBuiltins) {
      std::string source = b.source;
      if (!source.empty() && source.front() == '\n') source.erase(0, 1);
      m.emplace(b.name, std::move(source));
    }
    return m;
  }();
  return r;
}

}  // namespace

const std::string* builtin_chat_template(std::string_view name) {
  const Registry& r = registry();
  const auto it = r.find(name);
  return it == r.end() ? nullptr : &it->second;
}

std::vector<std::string> builtin_chat_template_names() {
  std::vector<std::string> names;
  for (const auto& [name, source] : registry()) names.push_back(name);
  return names;
}

}  // namespace ws::chat
