// Built-in templates by name (llama-server's --chat-template NAME): each must render byte
// for byte what llama.cpp's built-in C++ formatter produces for that name.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "chat/builtin_templates.h"
#include "chat/template.h"

using nlohmann::ordered_json;
using ws::chat::builtin_chat_template;
using ws::chat::builtin_chat_template_names;
using ws::chat::ChatTemplate;

namespace {

using Messages = std::vector<std::pair<std::string, std::string>>;

struct UpstreamCase {
  const char* name;
  Messages extra;
  const char* expected;
};

struct NamedCase {
  const char* name;
  const char* expected;
};

// The conversation of llama.cpp's tests/test-chat-template.cpp (main_automated_tests).
const Messages kConversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

const Messages kShortConversation = {
    {"system", " Be brief. "}, {"user", "Hi"}, {"assistant", " Hello! "}, {"tool", "42"}, {"user", "Thanks"},
};

// From llama.cpp tests/test-chat-template.cpp (commit 80fb11ac): the test case named in
// the comment, its expected_output, rendered with add_generation_prompt=true over
// kConversation plus the extra messages listed.
const UpstreamCase kUpstreamCases[] = {
    {"chatml",  // teknium/OpenHermes-2.5-Mistral-7B
     {},
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"},
    {"llama2",  // mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt)
     {},
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"},
    {"llama2-sys-bos",  // TheBloke/FusionNet_34Bx2_MoE-AWQ
     {},
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"},
    {"llama2-sys-strip",  // bofenghuang/vigogne-2-70b-chat
     {},
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]"},
    {"monarch",  // mlabonne/AlphaMonarch-7B
     {},
     "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n"},
    {"gemma",  // google/gemma-7b-it
     {},
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
    {"orion",  // OrionStarAI/Orion-14B-Chat
     {},
     "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n\nAssistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: </s>"},
    {"openchat",  // openchat/openchat-3.5-0106
     {},
     "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant:    I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question<|end_of_turn|>GPT4 Correct Assistant:"},
    {"deepseek",  // deepseek-ai/deepseek-coder-33b-instruct
     {},
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n"},
    {"vicuna",  // eachadea/vicuna-13b-1.1
     {},
     "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {"vicuna-orca",  // Orca-Vicuna
     {},
     "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {"command-r",  // CohereForAI/c4ai-command-r-plus
     {},
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"llama3",  // Llama-3
     {},
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"phi3",  // Phi-3-mini
     {},
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {"chatglm3",  // ChatGLM3
     {},
     "[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n Hi there<|user|>\n Who are you<|assistant|>\n    I am an assistant   <|user|>\n Another question<|assistant|>"},
    {"chatglm4",  // ChatGLM4
     {},
     "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>\n"},
    {"glmedge",  // GLMEdge
     {},
     "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>"},
    {"minicpm",  // MiniCPM-3B-OpenHermes-2.5-v2-GGUF
     {},
     "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an assistant<用户>Another question<AI>"},
    {"deepseek2",  // DeepSeek-V2
     {},
     "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:"},
    {"granite",  // ibm-granite/granite-3.0-8b-instruct
     {},
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"},
    {"mistral-v1",  // mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)
     {},
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]"},
    {"mistral-v3",  // Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start)
     {},
     "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]"},
    {"mistral-v3-tekken",  // Mistral-Nemo-Instruct-2407 (mistralai 'v3-tekken' template; modified to have system prompt at start)
     {},
     "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"},
    {"mistral-v7",  // mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)
     {},
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"},
    {"gigachat",  // ai-sage/GigaChat-20B-A3B-instruct
     {},
     "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>user<|role_sep|>Who are you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>   I am an assistant   <|message_sep|>user<|role_sep|>Another question<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>"},
    {"megrez",  // Infinigence/Megrez-3B-Instruct
     {},
     "<|role_start|>system<|role_end|>You are a helpful assistant<|turn_end|><|role_start|>user<|role_end|>Hello<|turn_end|><|role_start|>assistant<|role_end|>Hi there<|turn_end|><|role_start|>user<|role_end|>Who are you<|turn_end|><|role_start|>assistant<|role_end|>   I am an assistant   <|turn_end|><|role_start|>user<|role_end|>Another question<|turn_end|><|role_start|>assistant<|role_end|>"},
    {"phi4",  // phi-4
     {},
     "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>"},
    {"yandex",  // yandex/YandexGPT-5-Lite-8B-instruct
     {},
     " Пользователь: Hello\n\n Ассистент: Hi there\n\n Пользователь: Who are you\n\n Ассистент:    I am an assistant   \n\n Пользователь: Another question\n\n Ассистент:[SEP]"},
    {"bailing",  // inclusionAI/Ling-lite
     {},
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>Another question<role>ASSISTANT</role>"},
    {"seed_oss",  // ByteDance-Seed/Seed-OSS-36B-Instruct
     {},
     "<seed:bos>system\nYou are a helpful assistant<seed:eos><seed:bos>user\nHello<seed:eos><seed:bos>assistant\nHi there<seed:eos><seed:bos>user\nWho are you<seed:eos><seed:bos>assistant\nI am an assistant<seed:eos><seed:bos>user\nAnother question<seed:eos><seed:bos>assistant\n"},
    {"granite",  // ibm-granite/granite-3.x (tool call)
     {{"user", "What is the weather?"}, {"assistant_tool_call", "[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]"}, {"tool_response", "{\"temperature\": 72}"}},
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]<|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.0",  // ibm-granite/granite-4.0 (tool call)
     {{"user", "What is the weather?"}, {"assistant_tool_call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n</tool_call>"}, {"tool_response", "{\"temperature\": 72}"}},
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.1",  // ibm-granite/granite-4.1 (tool call)
     {{"user", "What is the weather?"}, {"assistant_tool_call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n</tool_call>"}, {"tool_response", "{\"temperature\": 72}"}},
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"},
};

// Names without a case in test-chat-template.cpp: the expected strings follow the
// name's branch of llama.cpp's llm_chat_apply_template (src/llama-chat.cpp), kConversation,
// add_generation_prompt=true (checked against that function compiled from the same commit).
const NamedCase kFormatterCases[] = {
    {"llama2-sys", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"},
    {"mistral-v7-tekken", "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"},
    {"falcon3", "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi there\n<|user|>\nWho are you\n<|assistant|>\n   I am an assistant   \n<|user|>\nAnother question\n<|assistant|>\n"},
    {"zephyr", "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n"},
    {"deepseek3", "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜><｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜><｜User｜>Another question<｜Assistant｜>"},
    {"deepseek-ocr", "You are a helpful assistantHelloHi thereWho are you   I am an assistant   Another question"},
    {"exaone3", "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]Who are you\n[|assistant|]I am an assistant[|endofturn|]\n[|user|]Another question\n[|assistant|]"},
    {"exaone4", "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]Who are you\n[|assistant|]I am an assistant[|endofturn|]\n[|user|]Another question\n[|assistant|]"},
    {"exaone-moe", "<|system|>\nYou are a helpful assistant<|endofturn|>\n<|user|>\nHello<|endofturn|>\n<|assistant|>\nHi there<|endofturn|>\n<|user|>\nWho are you<|endofturn|>\n<|assistant|>\nI am an assistant<|endofturn|>\n<|user|>\nAnother question<|endofturn|>\n<|assistant|>\n"},
    {"rwkv-world", "System: You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there\n\nUser: Who are you\n\nAssistant: I am an assistant\n\nUser: Another question\n\nAssistant:"},
    {"bailing-think", "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>Another question<role>ASSISTANT</role><think>"},
    {"bailing2", "<role>SYSTEM</role>You are a helpful assistant<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>Hi there<|role_end|><role>HUMAN</role>Who are you<|role_end|><role>ASSISTANT</role>   I am an assistant   <|role_end|><role>HUMAN</role>Another question<|role_end|><role>ASSISTANT</role>"},
    {"llama4", "<|header_start|>system<|header_end|>\n\nYou are a helpful assistant<|eot|><|header_start|>user<|header_end|>\n\nHello<|eot|><|header_start|>assistant<|header_end|>\n\nHi there<|eot|><|header_start|>user<|header_end|>\n\nWho are you<|eot|><|header_start|>assistant<|header_end|>\n\nI am an assistant<|eot|><|header_start|>user<|header_end|>\n\nAnother question<|eot|><|header_start|>assistant<|header_end|>\n\n"},
    {"smolvlm", "<|im_start|>You are a helpful assistant\n\nUser: Hello<end_of_utterance>\nAssistant: Hi there<end_of_utterance>\nUser: Who are you<end_of_utterance>\nAssistant:    I am an assistant   <end_of_utterance>\nUser: Another question<end_of_utterance>\nAssistant:"},
    {"hunyuan-moe", "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|extra_0|>Hi there<|eos|><|startoftext|>Who are you<|extra_0|>   I am an assistant   <|eos|><|startoftext|>Another question<|extra_0|>"},
    {"gpt-oss", "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>Hello<|end|><|start|>assistant<|message|>Hi there<|return|><|start|>user<|message|>Who are you<|end|><|start|>assistant<|message|>   I am an assistant   <|return|><|start|>user<|message|>Another question<|end|><|start|>assistant"},
    {"hunyuan-dense", "You are a helpful assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜><｜hy_Assistant｜>Hi there<｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are you<｜hy_Assistant｜><｜hy_Assistant｜>   I am an assistant   <｜hy_place▁holder▁no▁2｜><｜hy_User｜>Another question<｜hy_Assistant｜>"},
    {"hunyuan-vl", "<｜hy_begin▁of▁sentence｜>You are a helpful assistant<｜hy_place▁holder▁no▁3｜>Hello<｜hy_User｜>Hi there<｜hy_Assistant｜>Who are you<｜hy_User｜>   I am an assistant   <｜hy_Assistant｜>Another question<｜hy_User｜>"},
    {"kimi-k2", "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|>Hi there<|im_end|><|im_user|>user<|im_middle|>Who are you<|im_end|><|im_assistant|>assistant<|im_middle|>   I am an assistant   <|im_end|><|im_user|>user<|im_middle|>Another question<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"grok-2", "System: You are a helpful assistant<|separator|>\n\nHuman: Hello<|separator|>\n\nAssistant: Hi there<|separator|>\n\nHuman: Who are you<|separator|>\n\nAssistant:    I am an assistant   <|separator|>\n\nHuman: Another question<|separator|>\n\nAssistant:"},
    {"pangu-embedded", "[unused9]系统：You are a helpful assistant[unused10][unused9]用户：Hello[unused10][unused9]助手：Hi there[unused10][unused9]用户：Who are you[unused10][unused9]助手：   I am an assistant   [unused10][unused9]用户：Another question[unused10][unused9]助手："},
    {"solar-open", "<|begin|>system<|content|>You are a helpful assistant<|end|><|begin|>user<|content|>Hello<|end|><|begin|>assistant<|content|>Hi there<|end|><|begin|>user<|content|>Who are you<|end|><|begin|>assistant<|content|>   I am an assistant   <|end|><|begin|>user<|content|>Another question<|end|><|begin|>assistant"},
};

// Every name over kShortConversation (repeated system-less tail, a tool turn, padded
// content), add_generation_prompt=false; expected strings derived the same way.
const NamedCase kShortCases[] = {
    {"chatml", "<|im_start|>system\n Be brief. <|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello! <|im_end|>\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n"},
    {"llama2", "[INST]  Be brief. \nHi [/INST] Hello! </s>[INST] 42</s>[INST] Thanks [/INST]"},
    {"llama2-sys", "[INST] <<SYS>>\n Be brief. \n<</SYS>>\n\nHi [/INST] Hello! </s>[INST] 42</s>[INST] Thanks [/INST]"},
    {"llama2-sys-bos", "[INST] <<SYS>>\n Be brief. \n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] 42</s><s>[INST] Thanks [/INST]"},
    {"llama2-sys-strip", "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello!</s>[INST] 42</s>[INST] Thanks [/INST]"},
    {"mistral-v1", " [INST]  Be brief. \n\nHi [/INST]  Hello! </s> [INST]  42</s> [INST] Thanks [/INST]"},
    {"mistral-v3", "[INST]  Be brief. \n\nHi[/INST] Hello!</s>[INST]  42</s>[INST] Thanks[/INST]"},
    {"mistral-v3-tekken", "[INST] Be brief. \n\nHi[/INST] Hello! </s>[INST]42</s>[INST]Thanks[/INST]"},
    {"mistral-v7", "[SYSTEM_PROMPT]  Be brief. [/SYSTEM_PROMPT][INST] Hi[/INST]  Hello! </s> 42</s>[INST] Thanks[/INST]"},
    {"mistral-v7-tekken", "[SYSTEM_PROMPT] Be brief. [/SYSTEM_PROMPT][INST]Hi[/INST] Hello! </s>42</s>[INST]Thanks[/INST]"},
    {"phi3", "<|system|>\n Be brief. <|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n Hello! <|end|>\n<|tool|>\n42<|end|>\n<|user|>\nThanks<|end|>\n"},
    {"phi4", "<|im_start|>system<|im_sep|> Be brief. <|im_end|><|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|> Hello! <|im_end|><|im_start|>tool<|im_sep|>42<|im_end|><|im_start|>user<|im_sep|>Thanks<|im_end|>"},
    {"falcon3", "<|system|>\n Be brief. \n<|user|>\nHi\n<|assistant|>\n Hello! \n<|tool|>\n42\n<|user|>\nThanks\n"},
    {"zephyr", "<|system|>\n Be brief. <|endoftext|>\n<|user|>\nHi<|endoftext|>\n<|assistant|>\n Hello! <|endoftext|>\n<|tool|>\n42<|endoftext|>\n<|user|>\nThanks<|endoftext|>\n"},
    {"monarch", "system\n Be brief. </s>\n<s>user\nHi</s>\n<s>assistant\n Hello! </s>\n<s>tool\n42</s>\n<s>user\nThanks</s>\n"},
    {"gemma", "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>tool\n42<end_of_turn>\n<start_of_turn>user\nThanks<end_of_turn>\n"},
    {"orion", "Human:  Be brief. \n\nHi\n\nAssistant: </s> Hello! </s>42</s>Human: Thanks\n\nAssistant: </s>"},
    {"openchat", " Be brief. <|end_of_turn|>GPT4 Correct User: Hi<|end_of_turn|>GPT4 Correct Assistant:  Hello! <|end_of_turn|>GPT4 Correct Tool: 42<|end_of_turn|>GPT4 Correct User: Thanks<|end_of_turn|>"},
    {"vicuna", " Be brief. \n\nUSER: Hi\nASSISTANT:  Hello! </s>\nUSER: Thanks\n"},
    {"vicuna-orca", "SYSTEM:  Be brief. \nUSER: Hi\nASSISTANT:  Hello! </s>\nUSER: Thanks\n"},
    {"deepseek", " Be brief. ### Instruction:\nHi\n### Response:\n Hello! \n<|EOT|>\n### Instruction:\nThanks\n"},
    {"deepseek2", " Be brief. \n\nUser: Hi\n\nAssistant:  Hello! <｜end▁of▁sentence｜>User: Thanks\n\n"},
    {"deepseek3", " Be brief. \n\n<｜User｜>Hi<｜Assistant｜> Hello! <｜end▁of▁sentence｜><｜User｜>Thanks"},
    {"deepseek-ocr", " Be brief. Hi Hello! 42Thanks"},
    {"command-r", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Be brief.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hello!<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Thanks<|END_OF_TURN_TOKEN|>"},
    {"llama3", "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>tool<|end_header_id|>\n\n42<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nThanks<|eot_id|>"},
    {"chatglm3", "[gMASK]sop<|system|>\n  Be brief. <|user|>\n Hi<|assistant|>\n  Hello! <|tool|>\n 42<|user|>\n Thanks"},
    {"chatglm4", "[gMASK]<sop><|system|>\n Be brief. <|user|>\nHi<|assistant|>\n Hello! <|tool|>\n42<|user|>\nThanks"},
    {"glmedge", "<|system|>\n Be brief. <|user|>\nHi<|assistant|>\n Hello! <|tool|>\n42<|user|>\nThanks"},
    {"minicpm", "Be brief.<用户>Hi<AI>Hello!42<用户>Thanks<AI>"},
    {"exaone3", "[|system|]Be brief.[|endofturn|]\n[|user|]Hi\n[|assistant|]Hello![|endofturn|]\n[|user|]Thanks\n"},
    {"exaone4", "[|system|]Be brief.[|endofturn|]\n[|user|]Hi\n[|assistant|]Hello![|endofturn|]\n[|tool|]42[|endofturn|]\n[|user|]Thanks\n"},
    {"exaone-moe", "<|system|>\nBe brief.<|endofturn|>\n<|user|>\nHi<|endofturn|>\n<|assistant|>\nHello!<|endofturn|>\n<|tool|>\n42<|endofturn|>\n<|user|>\nThanks<|endofturn|>\n"},
    {"rwkv-world", "System: Be brief.\n\nUser: Hi\n\nAssistant: Hello!\n\nUser: Thanks\n\nAssistant:"},
    {"granite", "<|start_of_role|>system<|end_of_role|> Be brief. <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|> Hello! <|end_of_text|>\n<|start_of_role|>tool<|end_of_role|>42<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Thanks<|end_of_text|>\n"},
    {"granite-4.0", "<|start_of_role|>system<|end_of_role|> Be brief. <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|> Hello! <|end_of_text|>\n<|start_of_role|>tool<|end_of_role|>42<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Thanks<|end_of_text|>\n"},
    {"granite-4.1", "<|start_of_role|>system<|end_of_role|> Be brief. <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|> Hello! <|end_of_text|>\n<|start_of_role|>tool<|end_of_role|>42<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Thanks<|end_of_text|>\n"},
    {"gigachat", "<s> Be brief. <|message_sep|>user<|role_sep|>Hi<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|> Hello! <|message_sep|>user<|role_sep|>Thanks<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"},
    {"megrez", "<|role_start|>system<|role_end|> Be brief. <|turn_end|><|role_start|>user<|role_end|>Hi<|turn_end|><|role_start|>assistant<|role_end|> Hello! <|turn_end|><|role_start|>tool<|role_end|>42<|turn_end|><|role_start|>user<|role_end|>Thanks<|turn_end|>"},
    {"yandex", " Пользователь: Hi\n\n Ассистент:  Hello! \n\n Пользователь: Thanks\n\n"},
    {"bailing", "<role>SYSTEM</role> Be brief. <role>HUMAN</role>Hi<role>ASSISTANT</role> Hello! <role>TOOL</role>42<role>HUMAN</role>Thanks"},
    {"bailing-think", "<role>SYSTEM</role> Be brief. <role>HUMAN</role>Hi<role>ASSISTANT</role> Hello! <role>TOOL</role>42<role>HUMAN</role>Thanks"},
    {"bailing2", "<role>SYSTEM</role> Be brief. <|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role> Hello! <|role_end|><role>TOOL</role>42<|role_end|><role>HUMAN</role>Thanks<|role_end|>"},
    {"llama4", "<|header_start|>system<|header_end|>\n\nBe brief.<|eot|><|header_start|>user<|header_end|>\n\nHi<|eot|><|header_start|>assistant<|header_end|>\n\nHello!<|eot|><|header_start|>tool<|header_end|>\n\n42<|eot|><|header_start|>user<|header_end|>\n\nThanks<|eot|>"},
    {"smolvlm", "<|im_start|> Be brief. \n\nUser: Hi<end_of_utterance>\nAssistant:  Hello! <end_of_utterance>\nAssistant: 42<end_of_utterance>\nUser: Thanks<end_of_utterance>\n"},
    {"hunyuan-moe", "<|startoftext|> Be brief. <|extra_4|><|startoftext|>Hi<|extra_0|> Hello! <|eos|><|startoftext|>42<|extra_0|><|startoftext|>Thanks<|extra_0|>"},
    {"gpt-oss", "<|start|>system<|message|> Be brief. <|end|><|start|>user<|message|>Hi<|end|><|start|>assistant<|message|> Hello! <|return|><|start|>tool<|message|>42<|end|><|start|>user<|message|>Thanks<|end|>"},
    {"hunyuan-dense", " Be brief. <｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hi<｜hy_Assistant｜><｜hy_Assistant｜> Hello! <｜hy_place▁holder▁no▁2｜><｜hy_User｜>Thanks<｜hy_Assistant｜>"},
    {"hunyuan-vl", "<｜hy_begin▁of▁sentence｜> Be brief. <｜hy_place▁holder▁no▁3｜>Hi<｜hy_User｜> Hello! <｜hy_Assistant｜>Thanks<｜hy_User｜>"},
    {"kimi-k2", "<|im_system|>system<|im_middle|> Be brief. <|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|> Hello! <|im_end|><|im_system|>tool<|im_middle|>42<|im_end|><|im_user|>user<|im_middle|>Thanks<|im_end|>"},
    {"seed_oss", "<seed:bos>system\n Be brief. <seed:eos><seed:bos>user\nHi<seed:eos><seed:bos>assistant\nHello!<seed:eos><seed:bos>tool\n42<seed:eos><seed:bos>user\nThanks<seed:eos>"},
    {"grok-2", "System: Be brief.<|separator|>\n\nHuman: Hi<|separator|>\n\nAssistant:  Hello! <|separator|>\n\nHuman: Thanks<|separator|>\n\n"},
    {"pangu-embedded", "[unused9]系统： Be brief. [unused10][unused9]用户：Hi[unused10][unused9]助手： Hello! [unused10][unused9]工具：42[unused10][unused9]用户：Thanks[unused10]"},
    {"solar-open", "<|begin|>system<|content|> Be brief. <|end|><|begin|>user<|content|>Hi<|end|><|begin|>assistant<|content|> Hello! <|end|><|begin|>tool<|content|>42<|end|><|begin|>user<|content|>Thanks<|end|>"},
};

std::string render_builtin(const std::string& name, const Messages& messages, bool add_generation_prompt) {
  const std::string* source = builtin_chat_template(name);
  if (source == nullptr) throw std::runtime_error("no built-in template " + name);
  ordered_json msgs = ordered_json::array();
  for (const auto& [role, content] : messages) msgs.push_back({{"role", role}, {"content", content}});
  // bos/eos as a model would pass them: the built-ins must not use them (llama.cpp's
  // formatter hard-codes its markers).
  const ordered_json ctx = {{"messages", msgs},
                            {"add_generation_prompt", add_generation_prompt},
                            {"bos_token", "<BOS>"},
                            {"eos_token", "<EOS>"}};
  return ChatTemplate::parse(*source).render(ctx);
}

Messages concat(const Messages& a, const Messages& b) {
  Messages out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

TEST(BuiltinTemplates, MatchLlamaCppTestChatTemplate) {
  for (const UpstreamCase& c : kUpstreamCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(render_builtin(c.name, concat(kConversation, c.extra), true), c.expected);
  }
}

TEST(BuiltinTemplates, MatchLlamaCppFormatter) {
  for (const NamedCase& c : kFormatterCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(render_builtin(c.name, kConversation, true), c.expected);
  }
}

TEST(BuiltinTemplates, MatchLlamaCppFormatterWithoutGenerationPrompt) {
  for (const NamedCase& c : kShortCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(render_builtin(c.name, kShortConversation, false), c.expected);
  }
}

TEST(BuiltinTemplates, EveryNameIsTestedAndSorted) {
  const std::vector<std::string> names = builtin_chat_template_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* required : {"chatml", "llama2", "llama3", "gemma", "phi3", "phi4", "mistral-v7", "zephyr",
                               "deepseek3", "granite", "command-r", "vicuna", "gpt-oss"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  for (const std::string& name : names) {
    bool tested = std::any_of(std::begin(kUpstreamCases), std::end(kUpstreamCases),
                              [&](const UpstreamCase& c) { return c.name == name; }) ||
                  std::any_of(std::begin(kFormatterCases), std::end(kFormatterCases),
                              [&](const NamedCase& c) { return c.name == name; });
    EXPECT_TRUE(tested) << name;
    ASSERT_NE(builtin_chat_template(name), nullptr) << name;
  }
  EXPECT_EQ(names.size(), std::size(kShortCases));
}

TEST(BuiltinTemplates, UnknownNameIsNull) {
  EXPECT_EQ(builtin_chat_template("no-such-template"), nullptr);
  EXPECT_EQ(builtin_chat_template(""), nullptr);
  EXPECT_EQ(builtin_chat_template("ChatML"), nullptr);  // names are case-sensitive, as in llama.cpp
}

// A tool-calling assistant turn has content null in the OpenAI API; llama.cpp's formatter
// sees "" there, so the built-ins must not fail on it.
TEST(BuiltinTemplates, NullContentRendersEmpty) {
  const ordered_json ctx = {
      {"messages", ordered_json::parse(R"([{"role":"user","content":"Hi"},{"role":"assistant","content":null}])")},
      {"add_generation_prompt", false}};
  for (const std::string& name : builtin_chat_template_names()) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(ChatTemplate::parse(*builtin_chat_template(name)).render(ctx));
  }
  EXPECT_EQ(ChatTemplate::parse(*builtin_chat_template("chatml")).render(ctx),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n");
}
